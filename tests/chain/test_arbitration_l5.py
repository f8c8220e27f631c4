"""L5 as the seed says it ("wait for a person's decision; never guess"), on the session's real Prefect server.

- A `fail` alert is decided like any other: continue with data, through `slotrelay decide` and through
  the run's input form (the API call the UI's form makes), and the chain completes.
- A paused run has no time limit unless its chain sets `pause_timeout_seconds`; the run's state in the
  UI says which. Time is not waited out but contrasted: runs of a chain with a two-second limit and of
  one with none pause together; once the limited one has failed (in place: its own wait ran out; on a
  deployment: the server's pause-expiration service failed it), the other still waits, with no
  expiration on the server at all, where the former default (3600 s) would have set one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from uuid import UUID

import pytest

from harness.commands import SLOTRELAY
from slotrelay.chain.alerts import read_alert
from tests.support.arbitration import decide
from tests.support.chain_specs import node, route
from tests.support.waiting import API_POLL_SECONDS, wait_until

pytestmark = pytest.mark.prefect_server
ROOT = Path(__file__).resolve().parents[2]
STEPS = '''
from slotrelay.chain import NodeError


def denied(data):
    raise NodeError("write_denied", "the target refused the write")


def fine(data):
    return {"fine": True, **data}
'''


def fail_chain(folder: Path, chain_id: str, *, pause_timeout: int | None = None,
               declared: bool = True) -> Path:
    """denied (a `fail` type, or of no declared type) -> after; side -> side-2 does not depend on it."""
    folder.mkdir(parents=True)
    (folder / "l5_steps.py").write_text(STEPS)
    python = {"kind": "python"}
    document = {
        "chain_id": chain_id,
        "nodes": [node("denied", start=True, executor={**python, "callable": "l5_steps:denied"}),
                  node("after", executor={**python, "callable": "l5_steps:fine"}),
                  node("side", start=True, executor={**python, "callable": "l5_steps:fine"}),
                  node("side-2", executor={**python, "callable": "l5_steps:fine"})],
        "routes": [route("denied", "after"), route("side", "side-2")],
        "error_types": [{"error_type": "write_denied", "handling": "fail"}] if declared else [],
        **({"pause_timeout_seconds": pause_timeout} if pause_timeout is not None else {}),
    }
    path = folder / "node_chain.json"
    path.write_text(json.dumps(document))
    return path


def run_in_place(chain: Path) -> subprocess.Popen:
    """`slotrelay run --json`: a run with no deployment, paused in place."""
    return subprocess.Popen([SLOTRELAY, "run", str(chain), "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ})


def flow_run_state(flow_run_id: str):
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(flow_run_id).state


def paused_alert(folder: Path, run: subprocess.Popen | None = None, timeout: float = 180) -> Path:
    """The alert file once its run waits on the server (the alert says paused, and the API agrees)."""
    found: list[Path] = []

    def paused() -> bool:
        if run is not None:
            assert run.poll() is None, run.stderr.read()[-3000:]
        for path in sorted((folder / "alerts").glob("alert-*.json")):
            alert = read_alert(path)
            if alert.status == "paused":
                state = flow_run_state(alert.flow_run_id)
                if state is not None and state.is_paused():
                    found.append(path)
                    return True
        return False

    wait_until(paused, timeout=timeout, what=f"a paused alert in {folder}", interval=API_POLL_SECONDS)
    return found[0]


def test_a_fail_alert_is_decided_with_continue_through_slotrelay_decide(prefect_server, tmp_path) -> None:
    chain = fail_chain(tmp_path / "fail", "l5-fail")
    run = run_in_place(chain)
    alert_path = paused_alert(chain.parent, run)
    alert = read_alert(alert_path)
    assert (alert.node_id, alert.error_type, alert.handling) == ("denied", "write_denied", "fail")
    assert set(alert.decisions) == {"continue", "retry", "terminate", "reload"}
    assert alert.pause_timeout_seconds is None
    # The branch that does not need the failed node ran before the run asked; nothing downstream of it did.
    assert json.loads((chain.parent / "slots" / "side-2_output.json").read_text())["status"] == "completed"
    assert not (chain.parent / "slots" / "after_input.json").exists()
    state = flow_run_state(alert.flow_run_id)
    assert state.name == "Paused" and state.state_details.pause_timeout is None
    assert state.message.startswith(f"Waiting for a person's decision on denied (write_denied), alert "
                                    f"{alert_path.name}: no time limit"), state.message

    done = decide(alert_path, "continue", "--data", '{"by": "hand"}', "--comment", "the target was wrong")
    assert done.returncode == 0, done.stderr
    out, err = run.communicate(timeout=180)
    summary = json.loads(out)
    assert run.returncode == 0 and summary["state"] == "COMPLETED", err[-3000:]
    assert summary["nodes"]["denied"]["state"] == "Completed"
    assert summary["nodes"]["after"]["state"] == "Completed"
    assert json.loads((chain.parent / "slots" / "after_output.json").read_text())["data"] == {
        "fine": True, "by": "hand"}
    recorded = read_alert(alert_path)
    assert recorded.status == "decided" and recorded.decision.decision == "continue"
    assert recorded.decision.via == "cli" and recorded.decision.comment == "the target was wrong"


def test_a_run_paused_in_place_with_no_timeout_outlives_one_with_a_timeout(prefect_server, tmp_path) -> None:
    """The limited run fails when its two seconds run out; the other still waits, and a `fail` alert is then
    decided through the run's input form."""
    from prefect.flow_runs import resume_flow_run

    limited = fail_chain(tmp_path / "limited", "l5-limited", pause_timeout=2)
    waiting = fail_chain(tmp_path / "waiting", "l5-waiting")
    runs = {"limited": run_in_place(limited), "waiting": run_in_place(waiting)}
    waiting_alert = paused_alert(waiting.parent, runs["waiting"])

    # The limited run: its own pause ran out (its state said when), the run failed, its alert timed out.
    out, err = runs["limited"].communicate(timeout=300)
    summary = json.loads(out)
    assert runs["limited"].returncode == 1 and summary["state"] == "FAILED", err[-3000:]
    [limited_alert] = summary["alerts"]
    assert read_alert(limited_alert).status == "timed_out"
    engine_log = (limited.parent / "logs" / "engine.log").read_text()
    assert "the run fails with no decision in 2 s" in engine_log
    assert "no decision on denied within pause_timeout_seconds (2 s): the run fails" in engine_log

    # The other, started with it, still waits, and nothing on the server would ever end its pause.
    assert runs["waiting"].poll() is None
    alert = read_alert(waiting_alert)
    state = flow_run_state(alert.flow_run_id)
    assert state.is_paused() and state.state_details.pause_timeout is None, state
    assert "no time limit" in state.message

    # Decided through the run's input form: the form's schema is on the paused run; the UI sends the
    # answer (data as JSON text) with the run's resume.
    resume_flow_run(UUID(alert.flow_run_id), run_input={"decision": "continue", "data": '{"by": "the form"}',
                                                        "comment": "from the UI"})
    out, err = runs["waiting"].communicate(timeout=180)
    summary = json.loads(out)
    assert runs["waiting"].returncode == 0 and summary["state"] == "COMPLETED", err[-3000:]
    assert json.loads((waiting.parent / "slots" / "after_output.json").read_text())["data"] == {
        "fine": True, "by": "the form"}
    decided = read_alert(waiting_alert)
    assert (decided.decision.decision, decided.decision.via, decided.decision.decided_by) == (
        "continue", "ui", "prefect-ui")


def test_a_suspended_run_with_no_timeout_outlives_the_servers_expiry_of_one_with_a_timeout(
        prefect_server, tmp_path) -> None:
    """Deployment runs (served by `watch`) are suspended: the server's pause-expiration service fails
    the one with a timeout; the one without keeps waiting, then it is decided and completes. Here the
    failure is of no declared type (arbitration at once), as the limit applies to any pause."""
    from prefect.client.orchestration import get_client

    limited = fail_chain(tmp_path / "limited", "l5-s-limited", pause_timeout=2, declared=False)
    waiting = fail_chain(tmp_path / "waiting", "l5-s-waiting", declared=False)
    env = {**os.environ, "PREFECT_API_URL": prefect_server, "COLUMNS": "200"}
    log = tmp_path / "watch.log"
    with log.open("w") as handle:
        watch = subprocess.Popen([sys.executable, "-m", "slotrelay.cli", "watch", str(limited), str(waiting)],
                                 cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: "watching" in log.read_text() or watch.poll() is not None, timeout=90,
                   what="watch to start")
        assert watch.poll() is None, log.read_text()
        with get_client(sync_client=True) as client:
            runs = {
                name: client.create_flow_run_from_deployment(
                    client.read_deployment_by_name(f"chain/{chain_id}").id,
                    parameters={"chain_path": str(path), "stop_at_external": False})
                for name, path, chain_id in (("limited", limited, "l5-s-limited"),
                                             ("waiting", waiting, "l5-s-waiting"))
            }

            def suspended(name: str) -> bool:
                state = client.read_flow_run(runs[name].id).state
                return state is not None and state.is_paused() and state.name == "Suspended"

            def limited_waited() -> bool:
                return suspended("limited") or client.read_flow_run(runs["limited"].id).state.is_final()

            wait_until(limited_waited, timeout=180, what="the limited run to wait", interval=API_POLL_SECONDS)
            wait_until(lambda: suspended("waiting"), timeout=180, what="the waiting run to be suspended",
                       interval=API_POLL_SECONDS)
            waiting_state = client.read_flow_run(runs["waiting"].id).state
            assert waiting_state.state_details.pause_timeout is None
            assert "no time limit" in waiting_state.message, waiting_state.message
            history = [(s.name, s.message) for s in client.read_flow_run_states(runs["limited"].id)]
            [(_, message)] = [(n, m) for n, m in history if n == "Suspended"]
            assert "(pause_timeout_seconds 2); with no decision by then the run fails" in message, message

            # The server fails the limited run; the other is still suspended afterwards.
            wait_until(lambda: client.read_flow_run(runs["limited"].id).state.is_final(), timeout=180,
                       what="the server to fail the limited run", interval=API_POLL_SECONDS)
            ended = client.read_flow_run(runs["limited"].id).state
            assert ended.is_failed() and ended.message == "The flow was paused and never resumed.", ended
            assert suspended("waiting")

            [alert_file] = sorted((waiting.parent / "alerts").glob("alert-*.json"))
            assert read_alert(alert_file).handling == "arbitrate"
            done = decide(alert_file, "continue", "--data", '{"by": "hand"}')
            assert done.returncode == 0, done.stderr
            wait_until(lambda: client.read_flow_run(runs["waiting"].id).state.is_final(), timeout=180,
                       what="the decided run to end", interval=API_POLL_SECONDS)
            assert client.read_flow_run(runs["waiting"].id).state.is_completed()
        # The limited run's alert is still paused; `decide` refuses it, its run having failed.
        [limited_alert] = sorted((limited.parent / "alerts").glob("alert-*.json"))
        refused = decide(limited_alert, "continue")
        assert refused.returncode == 2 and "no longer paused" in refused.stderr, refused.stderr
    finally:
        watch.send_signal(signal.SIGINT)
        code = watch.wait(timeout=90)
    assert code == 0, log.read_text()
    assert json.loads((waiting.parent / "slots" / "after_output.json").read_text())["data"] == {
        "fine": True, "by": "hand"}
    # Started again once decided, the run takes the answer at once: it says it paused once, not again
    # just before the decision.
    said = (waiting.parent / "logs" / "engine.log").read_text().splitlines()
    pauses = [line for line in said if "paused for a decision on denied" in line]
    decision = [n for n, line in enumerate(said) if "decision on denied: continue" in line]
    assert len(pauses) == 1 and len(decision) == 1, "\n".join(said)
