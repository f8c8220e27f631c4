"""`--allow-write ''` is refused, naming the option (issue 29): resolved, an empty path is the current folder,
so `slotrelay mcp serve --allow-write ''` started in a cloned tree granted source-write over the whole tree
though nobody named it. Both commands that take the flag are run as a user runs them, as subprocesses.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.commands import SLOTRELAY


@pytest.mark.parametrize("empty", ["", "   "], ids=["empty", "blank"])
@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["mcp", "serve", "--workspace", "."], id="mcp-serve"),
        pytest.param(["psmr", "call", "operator.list", "{}"], id="psmr-call"),
    ],
)
def test_regression_an_empty_write_root_is_refused_naming_the_option(
    tmp_path: Path, command: list[str], empty: str
) -> None:
    (tmp_path / "mod.py").write_text("def f():\n    return 1\n")
    done = subprocess.run(
        [SLOTRELAY, *command, "--allow-write", empty],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert f"--allow-write {empty!r}: an empty path names no folder" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    # Refused before anything was built or served: the tree was not touched.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mod.py"]
