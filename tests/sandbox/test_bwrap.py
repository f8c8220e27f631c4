"""What only the bwrap backend does: a sandbox that cannot be set up is `SandboxUnavailable`."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from slotrelay import sandbox
from slotrelay.sandbox import SandboxLimits, SandboxUnavailable


@pytest.mark.bwrap
def test_a_failed_setup_is_unavailable_not_a_program_error(
    bwrap_ready: str, monkeypatch, request: pytest.FixtureRequest
) -> None:
    if os.geteuid() != 0:
        pytest.skip("bwrap runs as nobody only when slotrelay runs as root")
    # An admitted path that uid 65534 cannot reach: bwrap fails before the runner starts.
    private = Path(tempfile.mkdtemp(prefix="slotrelay-private-"))
    request.addfinalizer(lambda: shutil.rmtree(private))
    (private / "data.txt").write_text("x")
    monkeypatch.setenv("SLOTRELAY_SANDBOX_ROOTS", str(private))
    limits = SandboxLimits(fs={"allow_paths": [str(private / "data.txt")]})
    with pytest.raises(SandboxUnavailable, match="could not set up"):
        sandbox.run("print('never')", limits=limits, backend="bwrap")
    assert sandbox.run("import sys\nsys.exit(1)", backend="bwrap").status == "error"
