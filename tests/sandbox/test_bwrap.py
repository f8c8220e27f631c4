"""What only the bwrap backend does: a sandbox that cannot be set up is `SandboxUnavailable`, and its
per-uid process limit counts only bwrap sandboxes."""

from __future__ import annotations

import os
import shutil
import subprocess
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
        pytest.skip("bwrap runs as a host uid of its own only when slotrelay runs as root")
    # An admitted path that the sandbox's host uid cannot reach: bwrap fails before the runner starts.
    private = Path(tempfile.mkdtemp(prefix="slotrelay-private-"))
    request.addfinalizer(lambda: shutil.rmtree(private))
    (private / "data.txt").write_text("x")
    monkeypatch.setenv("SLOTRELAY_SANDBOX_ROOTS", str(private))
    limits = SandboxLimits(fs={"allow_paths": [str(private / "data.txt")]})
    with pytest.raises(SandboxUnavailable, match="could not set up"):
        sandbox.run("print('never')", limits=limits, backend="bwrap")
    assert sandbox.run("import sys\nsys.exit(1)", backend="bwrap").status == "error"


@pytest.mark.bwrap
def test_processes_of_docker_sandboxes_do_not_count_against_the_pids_limit(
    bwrap_ready: str, request: pytest.FixtureRequest
) -> None:
    if os.geteuid() != 0:
        pytest.skip("bwrap runs as a host uid of its own only when slotrelay runs as root")
    # Docker sandboxes run as uid 65534 on the host; here, 20 such processes stand in for them.
    others = [subprocess.Popen(["sleep", "60"], user=65534, group=65534, extra_groups=[]) for _ in range(20)]
    request.addfinalizer(lambda: [(process.kill(), process.wait()) for process in others])
    code = """
import os
children = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    children.append(pid)
print(sum(os.waitpid(pid, 0)[1] == 0 for pid in children))
"""
    result = sandbox.run(code, limits=SandboxLimits(pids=16), backend="bwrap")
    assert (result.status, result.stdout) == ("success", "4\n"), result.stderr
