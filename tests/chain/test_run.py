"""Whole chains on a real Prefect server: the example end to end, and every failure handling (L4)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from harness.commands import SLOTRELAY
from slotrelay.chain.alerts import read_alert
from tests.support.chain_specs import node, route
from tests.support.prefect_api import recorded_task_runs

pytestmark = pytest.mark.prefect_server


def task_runs(flow_run_id: str, count: int) -> dict[str, object]:
    """The flow run's `count` task runs by name, once the server has recorded them final."""
    return {run.name: run for run in recorded_task_runs([flow_run_id], count)}


def test_example_chain_runs_as_one_flow_run_with_every_task_run_recorded(prefect_server: str,
                                                                         example_copy: Path) -> None:
    done = subprocess.run([SLOTRELAY, "run", str(example_copy), "--json"], check=False, capture_output=True,
                          text=True,
                          env={**os.environ, "PREFECT_API_URL": prefect_server}, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    states = {node_id: n["state"] for node_id, n in summary["nodes"].items()}
    assert states == {
        "exec-scan": "Completed", "exec-dedup": "Completed", "exec-empty-report": "NotRun",
        "exec-enrich": "Completed", "exec-reviewer-agent": "Completed", "exec-review": "Completed",
        "exec-publish": "Completed", "exec-deploy": "Completed", "exec-check-site": "Completed",
        "exec-notify-cdn": "Skipped", "exec-archive": "Completed",
    }
    assert summary["state"] == "COMPLETED" and summary["alerts"] == []
    assert summary["nodes"]["exec-enrich"]["attempts"] == 2
    assert summary["nodes"]["exec-notify-cdn"]["error_type"] == "external_unreachable"
    assert summary["routes"]["route-dedup-to-empty-report"] == {"fired": False,
                                                                "reason": "len(data.items) = 3 != 0"}
    # A skip does not block downstream (seed 3.3): a plain `status equals completed` route fires from it.
    assert summary["routes"]["route-notify-cdn-to-archive"] == {
        "fired": True, "reason": "fired from a skip of exec-notify-cdn: the condition is only on status"}
    folder = example_copy.parent
    index = (folder / "work" / "published" / "index.md").read_bytes()
    assert index.count(b"- ") == 3
    # The deploy node made a release on C and B and switched both to it; the sitemap went with the index.
    assert (folder / "work" / "site" / "current" / "work" / "published" / "index.md").read_bytes() == index
    mirror = folder / "work" / "mirror-b" / "current"
    assert (mirror / "work" / "published" / "index.md").read_bytes() == index
    checked = json.loads(
        (folder / "slots" / "exec-check-site_output.json").read_text())["data"]["checked_urls"]
    assert [url.rpartition("/")[2] for url in checked] == ["index.md", "sitemap.xml"]
    assert all(url.startswith("http://127.0.0.1:") for url in checked)
    assert json.loads((folder / "slots" / "exec-dedup_output.json").read_text())["data"]["duplicates"] == 1
    babel = (folder / "slots" / "exec-scan_babel.jsonl").read_text().splitlines()
    assert json.loads(babel[-1])["to"] == ["exec-dedup"]
    assert "exec-enrich attempt 1 failed (source_busy)" in (folder / "logs" / "engine.log").read_text()

    ran = {node_id for node_id, state in states.items() if state != "NotRun"}
    runs = task_runs(summary["flow_run_id"], len(ran))
    assert set(runs) == ran
    assert runs["exec-notify-cdn"].state.name == "Skipped"
    assert runs["exec-notify-cdn"].state.type.value == "COMPLETED"
    assert runs["exec-enrich"].run_count == 2


STEPS = '''
import subprocess
from slotrelay.chain import NodeError

def denied(data):
    raise NodeError("write_denied", "the target refused the write")

def busy(data):
    raise NodeError("busy", "still busy")

def unreachable(data):
    raise NodeError("external_unreachable", "no route to host")

def fine(data):
    return {"fine": True, **data}

def impostor(data):
    from slotrelay.chain import NodeOutput
    return NodeOutput(data={}, capabilities_used=["scp"])
'''


def failing_chain() -> dict:
    fail_type = {"handling": "fail"}
    return {
        "chain_id": "failures",
        # Each alert (a fail, busy's escalation) pauses the run before it ends, for a person; nobody decides
        # here: the first asked times out, and the run fails.
        "pause_timeout_seconds": 2,
        "nodes": [
            node("denied", start=True, executor={"kind": "python", "callable": "steps:denied"}),
            node("after-denied", executor={"kind": "python", "callable": "steps:fine"}),
            node("busy", start=True, executor={"kind": "python", "callable": "steps:busy"}),
            node("unreachable", start=True, executor={"kind": "python", "callable": "steps:unreachable"}),
            node("after-skip", executor={"kind": "python", "callable": "steps:fine"}),
            node("non-json", start=True,
                 executor={"kind": "command", "argv": ["{python}", "-c", "print('hello')"]}),
            node("exit-3", start=True,
                 executor={"kind": "command", "argv": ["{python}", "-c", "raise SystemExit(3)"],
                                                  "error_map": {"3": "write_denied"}}),
            node("missing", start=True, executor={"kind": "python", "callable": "steps:nowhere"}),
            node("impostor", start=True, capabilities=["Read"], forbidden_capabilities=["scp"],
                 executor={"kind": "python", "callable": "steps:impostor"}),
        ],
        "routes": [
            route("denied", "after-denied"),
            route("unreachable", "after-skip"),
        ],
        "error_types": [
            {"error_type": "write_denied", **fail_type},
            {"error_type": "output_invalid", **fail_type},
            {"error_type": "executor_missing", **fail_type},
            {"error_type": "identity_mismatch", **fail_type},
            {"error_type": "external_unreachable", "handling": "skip"},
            {"error_type": "busy", "handling": "retry", "max_retries": 1, "retry_interval_seconds": 0,
             "escalate_after": "max_retries_exceeded"},
        ],
    }


def test_retry_skip_fail_and_escalation(prefect_server: str, write_chain) -> None:
    from flows.chain import read_summary, run_chain
    from slotrelay.chain import load_chain

    path = write_chain(failing_chain(), {"steps.py": STEPS})
    state = run_chain(str(path), return_state=True)
    summary = read_summary(load_chain(path), state)
    assert state.is_failed() and summary["state"] == "FAILED"
    nodes = summary["nodes"]
    assert nodes["denied"] == {"state": "Failed", "attempts": 1, "error_type": "write_denied",
                               "output_slot": str(path.parent / "slots" / "denied_output.json")}
    assert nodes["after-denied"]["state"] == "NotRun"
    assert summary["routes"]["denied-to-after-denied"] == {"fired": False,
                                                           "reason": "the source ended Failed"}
    assert (nodes["busy"]["state"], nodes["busy"]["attempts"]) == ("Failed", 2)
    assert nodes["unreachable"]["state"] == "Skipped" and nodes["after-skip"]["state"] == "Completed"
    assert (nodes["non-json"]["state"], nodes["non-json"]["error_type"]) == ("Failed", "output_invalid")
    assert nodes["exit-3"]["error_type"] == "write_denied"
    assert nodes["missing"]["error_type"] == "executor_missing"
    assert nodes["impostor"]["error_type"] == "identity_mismatch"

    alerts = {read_alert(p).node_id: read_alert(p) for p in summary["alerts"]}
    assert alerts["busy"].handling == "escalate" and alerts["busy"].attempts == 2
    assert sorted(a.status for a in alerts.values()) == ["open"] * (len(alerts) - 1) + ["timed_out"]
    assert all(a.decision is None for a in alerts.values())
    assert all(set(a.decisions) == {"continue", "retry", "terminate", "reload"} for a in alerts.values())
    assert alerts["denied"].handling == "fail" and alerts["denied"].flow_run_id == summary["flow_run_id"]
    assert "unreachable" not in alerts and all(Path(p).name.startswith("alert-") for p in summary["alerts"])
    failed_slot = json.loads((path.parent / "slots" / "denied_output.json").read_text())
    assert failed_slot["status"] == "failed" and failed_slot["error"]["error_type"] == "write_denied"


def test_a_run_can_begin_mid_chain_and_stop_at_an_external_node(prefect_server: str,
                                                                example_copy: Path) -> None:
    """What the watchdog sensor's runs do: begin at routed nodes, leave an unfinished external node alone."""
    from flows.chain import run_chain
    from slotrelay.chain import load_chain
    from slotrelay.chain.slots import input_slot_document, write_json_atomic

    chain = load_chain(example_copy)
    write_json_atomic(chain.resolve("slots/exec-review_input.json"),
                      input_slot_document(from_node="exec-enrich", route_id="route-enrich-to-review",
                                          data={}))
    stopped = run_chain(str(example_copy), start_nodes=["exec-review"], stop_at_external=True)
    assert stopped["state"] == "COMPLETED"
    assert {n: s["state"] for n, s in stopped["nodes"].items() if s["state"] != "NotRun"} == {}

    (example_copy.parent / "work").mkdir()
    index = example_copy.parent / "work" / "index.md"
    index.write_text("# Today\n")
    write_json_atomic(chain.resolve("slots/exec-notify-cdn_input.json"), input_slot_document(
        from_node="exec-publish", route_id="route-publish-to-notify-cdn", data={"index_file": str(index)}))
    resumed = run_chain(str(example_copy), start_nodes=["exec-notify-cdn"])
    assert resumed["nodes"]["exec-notify-cdn"]["state"] == "Skipped"
    assert resumed["nodes"]["exec-archive"]["state"] == "Completed"
    assert resumed["nodes"]["exec-scan"]["state"] == "NotRun"


JOIN_STEPS = '''
def left(data):
    return {"left": 1, "shared": "left"}

def right(data):
    return {"right": 2, "shared": "right"}

def join(data):
    return {"got": data}
'''


def test_a_join_of_two_sources_keeps_both_and_runs_once(prefect_server: str, write_chain) -> None:
    from flows.chain import run_chain

    python = {"kind": "python"}
    path = write_chain({
        "chain_id": "join",
        "nodes": [node("left", start=True, executor={**python, "callable": "steps:left"}),
                  node("right", start=True, executor={**python, "callable": "steps:right"}),
                  node("join", executor={**python, "callable": "steps:join"})],
        "routes": [route("left", "join"), route("right", "join")],
    }, {"steps.py": JOIN_STEPS})
    summary = run_chain(str(path))
    assert summary["state"] == "COMPLETED" and summary["nodes"]["join"]["attempts"] == 1
    assert set(task_runs(summary["flow_run_id"], 3)) == {"left", "right", "join"}
    joined = json.loads((path.parent / "slots" / "join_input.json").read_text())
    assert {source: entry["data"] for source, entry in joined["sources"].items()} == {
        "left": {"left": 1, "shared": "left"}, "right": {"right": 2, "shared": "right"}}
    # The merged data: the later route wins a key both sources have.
    expected = {"left": 1, "right": 2, "shared": "right"}
    assert joined["data"] == expected
    assert json.loads((path.parent / "slots" / "join_output.json").read_text())["data"] == {"got": expected}


WAITS = '''
import pathlib
from slotrelay.chain import NodeError

HERE = pathlib.Path(__file__).parent


def twice(data):
    tries = HERE / "tries.txt"
    tries.write_text(tries.read_text() + "x" if tries.exists() else "x")
    attempt = len(tries.read_text())
    if attempt == 1:
        raise NodeError("quick", "retry me at once")
    if attempt == 2:
        raise NodeError("patient", "retry me in 2 s")
    return {"attempts": attempt}
'''


def test_each_retry_waits_its_own_error_types_interval(prefect_server: str, write_chain) -> None:
    from prefect.client.orchestration import get_client

    from flows.chain import read_summary, run_chain
    from slotrelay.chain import load_chain

    path = write_chain({
        "chain_id": "waits",
        "nodes": [node("twice", start=True, executor={"kind": "python", "callable": "waits:twice"})],
        "error_types": [
            {"error_type": "quick", "handling": "retry", "max_retries": 2, "retry_interval_seconds": 0},
            {"error_type": "patient", "handling": "retry", "max_retries": 2, "retry_interval_seconds": 2}],
    }, {"waits.py": WAITS})
    state = run_chain(str(path), return_state=True)
    summary = read_summary(load_chain(path), state)
    assert summary["nodes"]["twice"]["attempts"] == 3
    [task_run] = recorded_task_runs([summary["flow_run_id"]], 1)
    with get_client(sync_client=True) as client:
        states = client.read_task_run_states(task_run.id)
    # What Prefect scheduled each retry for, from the moment it did: the W of the failure's own type.
    waits = [(s.state_details.scheduled_time - s.timestamp).total_seconds() for s in states
             if s.name == "AwaitingRetry"]
    assert [round(wait) for wait in waits] == [0, 2], waits


def test_each_node_outcome_is_read_from_its_final_state_in_this_process(prefect_server: str, write_chain,
                                                                        monkeypatch) -> None:
    """Settling a node takes its outcome from the final state the flow's process holds: Prefect's
    `State.result` would read it through its run-sync event loop thread, a hop there and back a node."""
    from prefect.client.schemas.objects import State

    from flows.chain import read_summary, run_chain
    from slotrelay.chain import load_chain

    read_through_prefect: list[str | None] = []
    original = State.result

    def counted(self: State, *args: object, **kwargs: object) -> object:
        if self.state_details.task_run_id is not None:
            read_through_prefect.append(self.name)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(State, "result", counted)
    python = {"kind": "python"}
    path = write_chain({
        "chain_id": "outcomes",
        "nodes": [node("first", start=True, executor={**python, "callable": "steps:fine"}),
                  node("unreachable", executor={**python, "callable": "steps:unreachable"}),
                  node("after-skip", executor={**python, "callable": "steps:fine"}),
                  node("denied", start=True, executor={**python, "callable": "steps:denied"})],
        "routes": [route("first", "unreachable"), route("unreachable", "after-skip")],
        "error_types": [{"error_type": "external_unreachable", "handling": "skip"},
                        {"error_type": "write_denied", "handling": "fail"}],
        "pause_timeout_seconds": 1,
    }, {"steps.py": STEPS})
    state = run_chain(str(path), return_state=True)
    nodes = read_summary(load_chain(path), state)["nodes"]
    assert {node_id: n["state"] for node_id, n in nodes.items()} == {
        "first": "Completed", "unreachable": "Skipped", "after-skip": "Completed", "denied": "Failed"}
    assert nodes["denied"]["error_type"] == "write_denied"
    assert read_through_prefect == []


def test_a_run_freezes_its_process_set_up_once(prefect_server: str, write_chain) -> None:
    """What is alive after a run's set-up (imports, Prefect, the chain) is out of the full collections'
    reach, frozen by the first run of the process only."""
    import gc

    from flows.chain import run_chain

    gc.unfreeze()
    path = write_chain({"chain_id": "frozen", "nodes": [
        node("only", start=True, executor={"kind": "python", "callable": "steps:fine"})], "routes": []},
        {"steps.py": STEPS})
    assert run_chain(str(path))["state"] == "COMPLETED"
    frozen = gc.get_freeze_count()
    assert frozen > 0
    assert run_chain(str(path))["state"] == "COMPLETED"
    # Frozen objects that die leave the count; a second freeze would add what the first run left alive.
    assert gc.get_freeze_count() <= frozen
