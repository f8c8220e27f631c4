"""Issue 11 item 8 on the session's real Prefect server: runs waiting for a person hold no runner slot.

`watch` serves the chains' deployments with Prefect's runner, which runs at most 5 flow runs at once
(here 2). A deployment run that needs a decision is suspended (its process ends), so more runs waiting
for people than the runner has slots leave room for another chain's run; a decision starts the suspended
run again, which takes what is done from its slots and alerts, receives the decision, and completes
without running a node twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.chains import asking_chains
from slotrelay.chain.alerts import read_alert
from tests.support.chain_specs import ROOT
from tests.support.prefect_api import deployment_runs
from tests.support.waiting import API_POLL_SECONDS, wait_until

pytestmark = pytest.mark.prefect_server

# The runner's process limit (Prefect's PREFECT_RUNNER_PROCESS_LIMIT, 5 by default) is 2 here, and one more
# run than that waits: what is proven is more waiting runs than slots, and each run is a process.
RUNNER_PROCESS_LIMIT = 2
WAITING_RUNS = RUNNER_PROCESS_LIMIT + 1

def task_run_names(flow_run_id) -> list[str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
    return sorted(r.name for r in runs)


def test_runs_waiting_for_a_person_leave_the_runner_free_and_resume_on_a_decision(prefect_server, tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    waits, other = asking_chains(tmp_path / "chains")
    env = {**os.environ, "PREFECT_API_URL": prefect_server, "COLUMNS": "200",
           "PREFECT_RUNNER_PROCESS_LIMIT": str(RUNNER_PROCESS_LIMIT)}
    command = [sys.executable, "-m", "slotrelay.cli", "watch", "--warm", "0", str(waits), str(other)]

    def start_watch(log: Path) -> subprocess.Popen:
        # No warm process: the runner's poll would hand these runs (created through the API, as from the
        # UI) to warm processes, which do not count toward the runner's limit this test is about.
        with log.open("w") as handle:
            started = subprocess.Popen(command, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT)
        wait_until(lambda: "watching" in log.read_text() or started.poll() is not None, timeout=60,
                   what="watch to start")
        assert started.poll() is None, log.read_text()
        return started

    # The runs are created while no `watch` polls, so that the first poll of the next one finds them all:
    # created under a running watch, a poll between two creations left the runner a free slot for the last
    # once the first two had suspended (on a quiet machine, well within a poll's interval).
    deploying = start_watch(tmp_path / "deploy.log")
    deploying.send_signal(signal.SIGINT)
    assert deploying.wait(timeout=90) == 0, (tmp_path / "deploy.log").read_text()
    with get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name("chain/waits")
        waiting = [
            client.create_flow_run_from_deployment(deployment.id, parameters={
                "chain_path": str(waits), "slots_root": str(tmp_path / f"run-{i}"),
                "stop_at_external": False})
            for i in range(WAITING_RUNS)
        ]
    log = tmp_path / "watch.log"
    watch = start_watch(log)
    try:
        with get_client(sync_client=True) as client:

            def suspended() -> bool:
                states = [r.state for r in client.read_flow_runs(
                    flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[r.id for r in waiting])))]
                return len(states) == WAITING_RUNS and all(
                    s is not None and s.is_paused() and s.name == "Suspended" for s in states)

            wait_until(suspended, timeout=300, what=f"{WAITING_RUNS} runs suspended for a decision",
                       interval=API_POLL_SECONDS)
            # The limit was the runner's while they started: it held a run back for want of a slot.
            assert "scheduled runs skipped (at capacity)" in log.read_text(), log.read_text()
            assert all(client.read_flow_run(r.id).state.state_details.pause_reschedule for r in waiting)

            # Another chain's run starts and completes although more runs wait than the runner has slots.
            [other_run] = [client.create_flow_run_from_deployment(
                client.read_deployment_by_name("chain/other").id, parameters={"chain_path": str(other)})]
            wait_until(lambda: client.read_flow_run(other_run.id).state.is_completed(), timeout=120,
                       what=f"the other chain's run to complete while {WAITING_RUNS} runs wait for people",
                       interval=API_POLL_SECONDS)

            # A decision from `slotrelay decide` starts the first waiting run again, which completes.
            [alert_file] = sorted((tmp_path / "run-0" / "alerts").glob("alert-*.json"))
            decided = subprocess.run(
                [sys.executable, "-m", "slotrelay.cli", "decide", str(alert_file), "continue", "--data",
                 '{"answer": 42}', "--comment", "by hand"],
                cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
            assert decided.returncode == 0, decided.stderr
            resumed = waiting[0].id
            wait_until(lambda: client.read_flow_run(resumed).state.is_final(), timeout=180,
                       what="the decided run to end",
                       interval=API_POLL_SECONDS)
            assert client.read_flow_run(resumed).state.is_completed(), client.read_flow_run(resumed).state
    finally:
        watch.send_signal(signal.SIGINT)
        code = watch.wait(timeout=90)
    assert code == 0, log.read_text()

    slots = tmp_path / "run-0" / "slots"
    assert json.loads((slots / "ask_output.json").read_text())["data"] == {"answer": 42}
    assert json.loads((slots / "after_output.json").read_text())["data"] == {"after": {"answer": 42}}
    # `first` and `ask` ran once, before the suspend; only `after` ran once the run started again.
    wait_until(lambda: task_run_names(resumed) == ["after", "ask", "first"], timeout=60,
               what="the task runs to be recorded",
               interval=API_POLL_SECONDS)
    assert "ask: taken back from alert" in (tmp_path / "run-0" / "logs" / "engine.log").read_text()
    alert = read_alert(alert_file)
    assert alert.status == "decided" and alert.decision.decision == "continue" and alert.decision.via == "cli"
    assert len(
        list((tmp_path / "run-0" / "alerts").glob("alert-*.json"))) == 1, "no second alert on the rerun"
    assert {r.state.name for r in deployment_runs("waits") if r.id != resumed} == {"Suspended"}
