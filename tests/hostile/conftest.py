"""What every hostile-clone test needs: a small package laid out as a cloned repository (committed, so
`--rev` and the git commands work on it), the `slotrelay` command run as a subprocess, and the MCP
server over stdio with the session's environment (the SDK hands a stdio server only a few variables).
Files a test plants (links, records, FIFOs) are the test's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

SLOTRELAY = str(Path(sys.executable).with_name("slotrelay"))
# Any single command: a timeout turns a hang into a failure instead of a stuck suite.
COMMAND_TIMEOUT_S = 180
PACKAGE = {
    "pkg/__init__.py": "",
    "pkg/mod.py": "def real():\n    return 1\n",
    "pkg/use.py": "from pkg.mod import real\n\n\ndef twice():\n    return real() + real()\n",
}
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"
}


def make_clone(root: Path, files: dict[str, str] | None = None) -> Path:
    """`files` (default: `PACKAGE`) committed in a fresh git repository at `root`; returns `root`."""
    for name, text in (files or PACKAGE).items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "clone"]):
        environment = {**os.environ, **GIT_ENV}
        subprocess.run(["git", *args], cwd=root, env=environment, check=True, capture_output=True)
    return root


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A cloned-looking repository holding `PACKAGE` (tmp_path/clone); tmp_path itself is 'outside'."""
    return make_clone(tmp_path / "clone")


def slotrelay(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`slotrelay ARGS` as a subprocess with the session's environment (plus `env`)."""
    return subprocess.run(
        [SLOTRELAY, *args],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        check=False,
    )


def psmr_call(operation: str, request: dict[str, Any], *flags: str) -> dict[str, Any]:
    """`slotrelay psmr call OPERATION REQUEST FLAGS`: the envelope it prints (never a traceback)."""
    done = slotrelay("psmr", "call", operation, json.dumps(request), *flags)
    assert "Traceback" not in done.stderr, done.stderr
    return dict(json.loads(done.stdout))


def mcp_client(root: Path, *flags: str) -> Client:
    """An MCP SDK client of `slotrelay mcp serve --workspace ROOT FLAGS` over stdio."""
    args = ["mcp", "serve", "--workspace", str(root), *flags]
    return Client(StdioServerParameters(command=SLOTRELAY, args=args, cwd=root, env=dict(os.environ)))


def snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry under `folder`: a file's bytes, a link's target (never followed)."""
    out: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        if path.is_symlink():
            out[key] = f"-> {os.readlink(path)}"
        elif path.is_file():
            out[key] = path.read_bytes()
    return out


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
