"""Hostile option values of `slotrelay watch`, `up` and `run` (issue 29, "Low"): each is refused when the
command line is read, as one `BAD_INPUT` line naming the option, exit 2, before anything is started or
created.

Each case runs the real command in a process of its own, with a deadline: a value that got through would
start a watcher (or a server) that never returns, and the case fails on the deadline instead of hanging.
Commands that would need a server get one that does not answer (`watch` then stops at exit 3) or a
`--host` that `up` refuses, so an accepted value never starts anything here; the block cases need the
session's real server, where the blocks are looked up.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.chains import make_chain
from harness.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 60


def slotrelay(args: list[str], *, cwd: Path, api_url: str) -> subprocess.CompletedProcess:
    """`slotrelay ARGS` in its own session; killed with its children past the deadline (an accepted value)."""
    env = {**os.environ, "PREFECT_API_URL": api_url, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    process = subprocess.Popen([sys.executable, "-m", "slotrelay.cli", *args], cwd=cwd, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                               text=True, start_new_session=True)
    try:
        out, err = process.communicate(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        pytest.fail(f"`slotrelay {' '.join(args)}` took the value and ran for {DEADLINE} s:\n{err[-2000:]}")
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def assert_refused(done: subprocess.CompletedProcess, option: str, says: str) -> None:
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.startswith(f"BAD_INPUT: {option} "), done.stderr
    assert says in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    return make_chain(tmp_path / "chain", "hostile-options", 1)


@pytest.fixture
def silent_api() -> str:
    """An API address nothing answers on: a command that took its options stops there (exit 3)."""
    return f"http://127.0.0.1:{free_port()}/api"


@pytest.mark.parametrize(("option", "value", "says"), [
    ("--window", "inf", "not a finite number of seconds"),
    ("--window", "nan", "not a finite number of seconds"),
    ("--window", "-1", "at least 0 s"),
    ("--window", "1e300", "at most 60 s"),
    ("--window", "soon", "not a number of seconds"),
    ("--crash-after", "inf", "not a finite number of seconds"),
    ("--warm", "-1", "at least 0"),
    ("--warm", "100000", "at most 32"),
    ("--pool", "", "a name of letters, digits"),
    ("--pool", "../../x", "a name of letters, digits"),
    ("--pool", "-x", "a name of letters, digits"),
    ("--model-block", "Not A Name", "lowercase letters, digits and dashes"),
    ("--sandbox-policy", "../x", "lowercase letters, digits and dashes"),
    ("--folders-block", "", "lowercase letters, digits and dashes"),
])
def test_watch_refuses_the_value(option: str, value: str, says: str, chain: Path, silent_api: str) -> None:
    extra = ["--pool", "p"] if option == "--crash-after" else []
    assert_refused(slotrelay(["watch", *extra, f"{option}={value}", str(chain)], cwd=chain.parent,
                             api_url=silent_api), option, says)


@pytest.mark.parametrize(("template", "says"), [
    ("{nope}", "only {chain_id} may be filled in"),
    ("chain/{chain_id!r}", "only {chain_id} may be filled in"),
    ("chain/{", "not a template"),
    ("chain-only", "FLOW/DEPLOYMENT"),
    ("a/b/c", "FLOW/DEPLOYMENT"),
    ("../x/{chain_id}", "FLOW/DEPLOYMENT"),
])
def test_watch_refuses_a_deployment_template(template: str, says: str, chain: Path, silent_api: str) -> None:
    assert_refused(slotrelay(["watch", "--no-serve", f"--deployment={template}", str(chain)],
                             cwd=chain.parent, api_url=silent_api), "--deployment", says)


@pytest.mark.parametrize("command", ["watch", "run"])
@pytest.mark.parametrize(("folder", "says"), [
    ("/proc", "cannot create files there"),
    ("absent", "no such folder (create it first)"),
    ("a-file", "not a folder"),
])
def test_a_slots_root_is_an_existing_folder_that_takes_files(command: str, folder: str, says: str,
                                                             chain: Path, silent_api: str,
                                                             tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    given = folder if folder.startswith("/") else str(tmp_path / folder)
    done = slotrelay([command, f"--slots-root={given}", str(chain)], cwd=tmp_path, api_url=silent_api)
    assert_refused(done, "--slots-root", says)
    assert not (tmp_path / "absent").exists()


@pytest.mark.parametrize(("option", "value", "says"), [
    ("--port", "0", "at least 1"),
    ("--port", "70000", "at most 65535"),
    ("--port", "http", "not a whole number"),
    ("--psmr-port", "-5", "at least 1"),
    ("--warm", "nan", "not a whole number"),
    ("--home", "/proc/prefect", "cannot create files in /proc"),
    ("--home", "{tmp}/absent/deeper", "no such folder"),
    ("--psmr", "{tmp}/absent", "no such folder"),
    ("--model-block", "UPPER", "lowercase letters, digits and dashes"),
])
def test_up_refuses_the_value(option: str, value: str, says: str, chain: Path, silent_api: str,
                              tmp_path: Path) -> None:
    # A value taken by mistake stops at the --host check, which is in the command's body: nothing starts.
    args = ["up", "--host", "192.0.2.1", f"{option}={value.format(tmp=tmp_path)}", str(chain)]
    assert_refused(slotrelay(args, cwd=tmp_path, api_url=silent_api), option, says)
    assert not (tmp_path / "absent").exists()


@pytest.mark.prefect_server
@pytest.mark.parametrize(("option", "kind"), [
    ("--model-block", "slotrelay code model"),
    ("--sandbox-policy", "slotrelay sandbox policy"),
    ("--folders-block", "slotrelay chain folders"),
])
def test_watch_refuses_a_block_the_server_does_not_have(option: str, kind: str, chain: Path,
                                                       prefect_server: str) -> None:
    done = slotrelay(["watch", f"{option}=no-such-block", str(chain)], cwd=chain.parent,
                     api_url=prefect_server)
    assert_refused(done, option, f"no {kind} block named 'no-such-block' on {prefect_server}")
