"""`slotrelay up`: a real server with its UI, the watcher, a flow run in progress, and one SIGINT stops
all."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import psutil
import pytest

from harness.chains import agent_writes
from harness.ports import free_port
from tests.support.prefect_api import http_status
from tests.support.slotrelay_up import interrupt_up, migrated_home, start_up, wait_for_up

ROOT = Path(__file__).resolve().parents[2]
SLOW_MODULE = '''
import time

def slow(data):
    time.sleep(120)
    return {"slept": True}
'''


def slow_chain(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "slow_work.py").write_text(SLOW_MODULE)
    chain = {
        "chain_id": "slow",
        "nodes": [
            {"node_id": "ask", "output_slot": {"slot_id": "ask", "path": "slots/ask_output.json"},
             "capabilities": ["Write"], "executor": {"kind": "external"}},
            {"node_id": "work", "input_slot": {"slot_id": "work-in", "path": "slots/work_input.json"},
             "output_slot": {"slot_id": "work", "path": "slots/work_output.json"},
             "executor": {"kind": "python", "callable": "slow_work:slow"}},
        ],
        "routes": [{"route_id": "ask-to-work", "from_node": "ask", "to_node": "work"}],
    }
    path = folder / "node_chain.json"
    path.write_text(json.dumps(chain))
    return path


def flow_run_processes(pid: int, log: Path) -> list[psutil.Process]:
    """The processes under `pid` running a flow run: `prefect.engine` ones, and a warm process the
    log says took one (`--warm`: whichever is ready first runs it); ones that end while being looked
    at are skipped."""
    warm = {int(found) for found in re.findall(r"runs in warm process (\d+)", log.read_text())}
    found = []
    for proc in psutil.Process(pid).children(recursive=True):
        try:
            if proc.pid in warm or "prefect.engine" in " ".join(proc.cmdline()):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def saved_blocks() -> None:
    """The blocks `up` is given, saved on the session server: `watch` looks each block up at start, on
    the server `up` starts on a copy of that server's database (`migrated_home`)."""
    from blocks import CodeModel, SandboxPolicy

    CodeModel(base_url="http://127.0.0.1:9/v1", model="team").save("team-model", overwrite=True)
    SandboxPolicy().save("team-sandbox", overwrite=True)


@pytest.mark.prefect_server
def test_up_serves_the_ui_runs_the_watcher_and_one_sigint_stops_everything_with_no_traceback(prefect_server,
                                                                                         tmp_path):
    """`up` serves the UI and hands its watch options to the watcher; one Ctrl-C (SIGINT) stops it all, a
    flow run in progress included, quietly: its warm processes, one running the flow run and one idle on
    its pipe, are stopped by their pool, not interrupted by the signal `up` sends the watcher's process
    group."""
    chain = slow_chain(tmp_path / "slow")
    saved_blocks()
    home = migrated_home(tmp_path / "home")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "up.log"
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    with log.open("w") as handle:
        up = subprocess.Popen(
            [sys.executable, "-m", "slotrelay.cli", "up", "--port", str(port), "--home", str(home),
             "--warm", "2", "--model-block", "team-model", "--sandbox-policy", "team-sandbox", str(chain)],
            cwd=chain.parent, env={**env, "COLUMNS": "200"}, stdout=handle, stderr=subprocess.STDOUT,
        )
    tree: list[psutil.Process] = []
    try:
        wait_for_up(lambda: base in log.read_text(), 240, "the UI address to be printed", up, log)
        # A loaded machine can take longer than one request's timeout to answer: ask until 200.
        wait_for_up(lambda: http_status(f"{base}/") == 200, 60, "the UI to answer 200 on /", up, log)
        wait_for_up(lambda: http_status(f"{base}/api/deployments/name/chain/slow") == 200, 180,
                    "the served deployment", up, log)
        # `up` hands its watch options to the watcher: the blocks become the deployment's parameters.
        with urllib.request.urlopen(f"{base}/api/deployments/name/chain/slow") as answer:
            parameters = json.load(answer)["parameters"]
        assert (parameters["model_block"], parameters["sandbox_policy"]) == ("team-model", "team-sandbox")
        wait_for_up(lambda: "2 warm process(es)" in log.read_text(), 60, "the watcher's line", up, log)
        # Both warm processes idle, blocked on their pipe (where a Ctrl-C used to raise KeyboardInterrupt):
        # the flow run goes to one of them, the other is still idle when the Ctrl-C comes.
        wait_for_up(lambda: len(re.findall(r"warm process \d+ ready", log.read_text())) == 2, 240,
                    "two warm processes ready", up, log)

        # A flow run in progress when the Ctrl-C comes: its process must not outlive `up`.
        agent_writes(tmp_path / "slow", "ask", {"go": True})

        wait_for_up(lambda: flow_run_processes(up.pid, log), 180, "a flow-run process", up, log)
        tree = psutil.Process(up.pid).children(recursive=True)
        assert len(tree) >= 3  # the server, the watcher, the flow run (and their helpers)
    finally:
        code = interrupt_up(up)
    said = log.read_text()
    assert code == 0, said
    assert "slotrelay up: stopped" in said
    assert "Traceback" not in said and "KeyboardInterrupt" not in said, said
    _gone, alive = psutil.wait_procs(tree, timeout=5)
    assert alive == [], f"left behind: {[p.cmdline() for p in alive]}"
    assert http_status(f"{base}/") == 0


def test_up_refuses_a_non_loopback_host(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "slotrelay.cli", "up", "--host", "0.0.0.0", "--home", str(tmp_path)],
        check=False, cwd=ROOT, capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 2
    assert "loopback" in done.stderr


def test_watch_names_a_bad_chain_and_a_missing_api(tmp_path):
    bad = tmp_path / "node_chain.json"
    bad.write_text(json.dumps({"chain_id": "bad", "nodes": [{"node_id": "a"}]}))
    done = subprocess.run([sys.executable, "-m", "slotrelay.cli", "watch", str(bad)],
                          check=False, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 2
    assert "output_slot" in done.stderr

    good = slow_chain(tmp_path / "good")
    env = {**os.environ, "PREFECT_API_URL": f"http://127.0.0.1:{free_port()}/api"}
    done = subprocess.run([sys.executable, "-m", "slotrelay.cli", "watch", str(good)],
                          check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 3
    # The one message of deployments.server.require_api, naming where the address came from.
    assert f"no Prefect server answers at {env['PREFECT_API_URL']} (PREFECT_API_URL)" in done.stderr


@pytest.mark.prefect_server
def test_up_from_a_users_folder_watches_its_chain_keeps_its_server_there_and_refuses_a_second_up_on_it(
    prefect_server, tmp_path
):
    project = tmp_path / "project"
    slow_chain(project)
    # The folder's own home, its database migrated ahead (a fresh one would only take longer to start).
    home = migrated_home(project / ".slotrelay" / "prefect")
    port, log = free_port(), tmp_path / "up.log"
    base = f"http://127.0.0.1:{port}"
    up = start_up(["--port", str(port), "--warm", "0"], cwd=project, log=log)
    try:
        wait_for_up(lambda: "Ctrl-C stops" in log.read_text(), 240, "the panel", up, log)
        said = log.read_text()
        assert f"watching    {project / 'node_chain.json'}" in said, said
        assert f"home        {home}" in said and f"export PREFECT_API_URL={base}/api" in said, said
        from deployments.server import home_holder

        holder = home_holder(home)
        assert holder is not None and (holder.api_url, holder.started_by) == (f"{base}/api", "up")

        # Another folder, another port, the same home: two servers would write one database.
        other = slow_chain(tmp_path / "other")
        second_log = tmp_path / "second.log"
        second = start_up(["--port", str(free_port()), "--home", str(home), "--warm", "0", str(other)],
                          cwd=other.parent, log=second_log)
        try:
            code = second.wait(timeout=180)
        except subprocess.TimeoutExpired:
            interrupt_up(second)
            pytest.fail(f"a second `up` started on the home in use:\n{second_log.read_text()}")
        refused = " ".join(second_log.read_text().split())
        assert code == 3, refused
        assert f"HOME_IN_USE: {home} is the home of the Prefect server at {base}/api" in refused
        assert "started by `slotrelay up`): a second server would share its database" in refused, refused
        assert "Traceback" not in refused

        wait_for_up(lambda: http_status(f"{base}/api/deployments/name/chain/slow") == 200, 180,
                    "the folder's chain served", up, log)
    finally:
        code = interrupt_up(up)
    assert code == 0, log.read_text()
    assert home_holder(home) is None  # the lock goes with the server (killed by then: `up` waits for it)


@pytest.mark.prefect_server
def test_watch_and_up_refuse_to_start_without_a_required_variable_and_name_it(prefect_server, tmp_path):
    chain = slow_chain(tmp_path / "needs")
    document = json.loads(chain.read_text())
    chain.write_text(json.dumps({**document, "required_env": ["SLOTRELAY_TEST_NEVER_SET"]}))
    (chain.parent / ".env").write_text("SLOTRELAY_TEST_OTHER=1\n")
    env = {**{k: v for k, v in os.environ.items() if k != "SLOTRELAY_TEST_NEVER_SET"}, "COLUMNS": "400"}
    watched = subprocess.run([sys.executable, "-m", "slotrelay.cli", "watch", str(chain)], check=False,
                             cwd=ROOT, env={**env, "PREFECT_API_URL": prefect_server}, capture_output=True,
                             text=True, timeout=180)
    assert watched.returncode == 3, watched.stderr
    assert f"cannot start: {chain}: SLOTRELAY_TEST_NEVER_SET is not set" in " ".join(watched.stderr.split())
    assert not (chain.parent / ".slotrelay-routing-ledger.jsonl").exists(), "nothing was watched"
    # `up` checks before it starts a server.
    upped = subprocess.run([sys.executable, "-m", "slotrelay.cli", "up", "--home", str(tmp_path / "home"),
                            "--port", str(free_port()), str(chain)], check=False, cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=180)
    assert upped.returncode == 3, upped.stderr
    assert "SLOTRELAY_TEST_NEVER_SET is not set" in " ".join(upped.stderr.split())
    assert not (tmp_path / "home").exists(), "no server was started"
