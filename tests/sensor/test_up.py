"""`slotrelay up`: a real server with its UI, the watcher, a flow run in progress, and one SIGINT stops all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from .chains import agent_writes, free_port

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


def get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=3) as answer:
            return answer.status
    except OSError:
        return 0


def wait_for(condition, timeout: float, what: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            pytest.fail(f"`slotrelay up` exited with {process.returncode} waiting for {what}:\n{log.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}:\n{log.read_text()}")
        time.sleep(0.25)


def test_up_serves_the_ui_runs_the_watcher_and_stops_everything_on_one_sigint(tmp_path):
    chain = slow_chain(tmp_path / "slow")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "up.log"
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    with log.open("w") as handle:
        up = subprocess.Popen(
            [sys.executable, "-m", "slotrelay.cli", "up", "--port", str(port), "--home", str(tmp_path / "home"),
             str(chain)],
            cwd=ROOT, env={**env, "COLUMNS": "200"}, stdout=handle, stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: base in log.read_text(), 240, "the UI address to be printed", up, log)
        assert get(f"{base}/") == 200
        wait_for(lambda: get(f"{base}/api/deployments/name/chain/slow") == 200, 180, "the served deployment", up, log)

        # A flow run in progress when the Ctrl-C comes: its process must not outlive `up`.
        agent_writes(tmp_path / "slow", "ask", {"go": True})

        def running_flow() -> bool:
            tree = psutil.Process(up.pid).children(recursive=True)
            return any("prefect.engine" in " ".join(p.cmdline()) for p in tree if p.is_running())

        wait_for(running_flow, 180, "a flow-run process", up, log)
        tree = psutil.Process(up.pid).children(recursive=True)
        assert len(tree) >= 3  # the server, the watcher, the flow run (and their helpers)
    finally:
        up.send_signal(signal.SIGINT)
        try:
            code = up.wait(timeout=180)
        except subprocess.TimeoutExpired:
            up.kill()
            raise
    assert code == 0, log.read_text()
    _gone, alive = psutil.wait_procs(tree, timeout=5)
    assert alive == [], f"left behind: {[p.cmdline() for p in alive]}"
    assert get(f"{base}/") == 0


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
    assert "No Prefect API answers" in done.stderr
