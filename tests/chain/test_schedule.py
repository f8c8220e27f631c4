"""The chain scheduler from plain Python: no Prefect, a driver of a few lines running nodes in order.

`run_plain` is what flows/chain.py does with Prefect tasks, done synchronously: it runs each node the
schedule hands out (with the node's retries, counted per error type by `RetryBook`), feeds the
outcome back, makes the writes and writes the alerts asked for, and answers arbitrations from a script
of decisions.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import pytest

from slotrelay.chain import NodeError, NodeOutcome, NodeState, load_chain
from slotrelay.chain.alerts import Alert, Decision, alert_path, write_alert
from slotrelay.chain.routing import WriteInput
from slotrelay.chain.runner import execute_node, write_ended
from slotrelay.chain.schedule import (
    Arbitrate,
    ChainSchedule,
    Finished,
    RaiseAlert,
    Reload,
    RetryBook,
    Run,
    Wait,
    Write,
    WriteOutput,
    apply_write,
)
from slotrelay.chain.slots import input_slot_document, output_slot_document, read_slot, write_json_atomic
from slotrelay.timestamps import now_iso
from tests.support.chain_specs import node, route

STEPS = '''
import json, pathlib
from slotrelay.chain import NodeError

HERE = pathlib.Path(__file__).parent


def count(name):
    with (HERE / "runs.txt").open("a") as runs:
        runs.write(name + "\\n")


def ok(data):
    count("ok")
    return {**data, "n": data.get("n", 0) + 1}


def unreachable(data):
    count("unreachable")
    raise NodeError("external_unreachable", "the CDN does not answer")


def broken(data):
    count("broken")
    raise NodeError("bad_input", "cannot use this")


def mystery(data):
    count("mystery")
    raise NodeError("never_declared", "nobody said what this means")


def review(data):
    count("review")
    return {"verdict": "rework", "draft": data.get("n")}


def source(data):
    count("source")
    return {"n": int((HERE / "value.txt").read_text())}


def flaky(data):
    count("flaky")
    marker = HERE / "flaky.ok"
    if not marker.exists():
        raise NodeError("flaky", "not yet")
    return {"flaky": "fine"}
'''
ERROR_TYPES = [
    {"error_type": "external_unreachable", "handling": "skip"},
    {"error_type": "bad_input", "handling": "fail"},
    {"error_type": "flaky", "handling": "retry", "max_retries": 1, "escalate_after": "max_retries_exceeded"},
]
LOG = logging.getLogger("tests.schedule")


def py(function: str) -> dict[str, Any]:
    return {"kind": "python", "callable": f"steps:{function}"}


def build(write_chain, nodes: list, routes: list, **extra: Any):
    path = write_chain(
        {"chain_id": "plain", "nodes": nodes, "routes": routes, "error_types": ERROR_TYPES, **extra},
        {"steps.py": STEPS})
    return load_chain(path)


def attempt_node(chain, node_id: str, book: RetryBook) -> NodeOutcome:
    """What tasks/node.py does, without Prefect: attempts with the node's retries, then one outcome."""
    retries = chain.node(node_id).retry.max_retries if chain.node(node_id).retry else 0
    for attempt in range(1, retries + 2):
        try:
            document, digest = execute_node(chain, node_id, attempt=attempt)
        except NodeError as error:
            handling = book.failed(node_id, chain, error, attempt=attempt, retries=retries)
            if handling == "retry":
                continue
            status = "skipped" if handling == "skip" else "failed"
            written = write_ended(chain, node_id, status=status, error=error, attempt=attempt)
            return NodeOutcome.failure(node_id, NodeState(status.capitalize()), attempts=attempt, error=error,
                                       handling=handling, document=written[0] if written else None,
                                       digest=written[1] if written else None)
        book.forget(node_id)
        return NodeOutcome(node_id, NodeState.COMPLETED, attempt, document=document, digest=digest)
    raise AssertionError("unreachable: the last attempt never retries")


def run_plain(chain, *, start: list[str] | None = None, resume: bool = False,
              decisions: dict[str, list[str]] | None = None, schedule: ChainSchedule | None = None):
    schedule = schedule or ChainSchedule(chain, notes=LOG, resume=resume)
    schedule.start(start or chain.start_nodes())
    book, pending, ran, asked = RetryBook(), [], [], []
    while True:
        step = schedule.next_step()
        if isinstance(step, Run):
            pending.extend(step.nodes)
        elif isinstance(step, Wait):
            node_id = pending.pop(0)
            ran.append(node_id)
            schedule.settle(node_id, attempt_node(schedule.chain, node_id, book))
        elif isinstance(step, Write):
            failed = []
            for write in step.writes:
                try:
                    apply_write(schedule.chain, write)
                except OSError as denied:
                    failed.append((write, denied))
            schedule.written(failed)
        elif isinstance(step, RaiseAlert):
            escalation = step.escalation
            schedule.alerted(escalation.node_id,
                             write_test_alert(chain, escalation.outcome, escalation.reason))
        elif isinstance(step, Arbitrate):
            asked.append(step.node_id)
            answer = (decisions or {})[step.node_id].pop(0)
            name, _, data = answer.partition(":")
            schedule.decided(step.node_id, step.alert, Decision(
                decision=name, data={"given": data} if data else None, decided_at=now_iso(), via="cli"))
        elif isinstance(step, Reload):
            schedule.reloaded(step.node_id, step.alert, load_chain(schedule.chain.source))
        else:
            assert isinstance(step, Finished)
            return schedule, ran, asked


def write_test_alert(chain, outcome: NodeOutcome, reason: str, *, flow_run_id: str = "plain-run",
                     status: str = "open") -> Path:
    alert = Alert(alert_id=outcome.node_id, created_at=now_iso(), chain_id=chain.chain_id, chain_path=None,
                  flow_run_id=flow_run_id, node_id=outcome.node_id,
                  error_type=outcome.error_type or "unknown",
                  message=outcome.message or "", attempts=outcome.attempts, input_slot=None,
                  output_slot=None,
                  handling=outcome.handling, reason=reason, status=status)
    return write_alert(alert_path(chain.work_dir / "alerts", outcome.node_id), alert)


def states(schedule: ChainSchedule) -> dict[str, str]:
    return {node_id: entry["state"] for node_id, entry in schedule.summary(None)["nodes"].items()}


def runs(chain) -> list[str]:
    path = chain.base_dir / "runs.txt"
    return path.read_text().split() if path.exists() else []


def test_a_linear_chain_runs_in_order_and_a_condition_that_does_not_hold_leaves_its_target(
    write_chain) -> None:
    chain = build(write_chain, [node("a", start=True, executor=py("ok")), node("b", executor=py("ok")),
                                node("never", executor=py("ok"))],
                  [route("a", "b"),
                   route("a", "never", condition={"field": "data.n", "operator": "equals", "value": 9})])
    schedule, ran, _ = run_plain(chain)
    assert ran == ["a", "b"]
    summary = schedule.summary("x")
    assert summary["state"] == "COMPLETED" and states(schedule) == {"a": "Completed", "b": "Completed",
                                                                  "never": "NotRun"}
    assert summary["routes"]["a-to-never"] == {"fired": False, "reason": "data.n is 1, not 9"}
    assert read_slot(chain.resolve("slots/b_output.json"))["data"] == {"n": 2}


def test_a_skip_leads_on_through_status_only_routes_and_data_conditions_see_what_it_received(
    write_chain) -> None:
    chain = build(write_chain, [
        node("a", start=True, executor=py("ok")), node("cdn", executor=py("unreachable")),
        node("archive", executor=py("ok")), node("when-one", executor=py("ok")),
        node("when-two", executor=py("ok"))],
        [route("a", "cdn"), route("cdn", "archive"),
         route("cdn", "when-one", condition={"field": "data.n", "operator": "equals", "value": 1}),
         route("cdn", "when-two", condition={"field": "data.n", "operator": "equals", "value": 2})])
    schedule, ran, _ = run_plain(chain)
    assert ran == ["a", "cdn", "archive", "when-one"]
    assert states(schedule) == {"a": "Completed", "cdn": "Skipped", "archive": "Completed",
                                "when-one": "Completed",
                                "when-two": "NotRun"}
    routes = schedule.summary(None)["routes"]
    assert routes["cdn-to-archive"] == {"fired": True,
                                        "reason": "fired from a skip of cdn: the condition is only on status"}
    assert routes["cdn-to-when-one"]["fired"] and "from a skip of cdn, on the data it received" in \
        routes["cdn-to-when-one"]["reason"]
    assert not routes["cdn-to-when-two"]["fired"]
    # The archive got what the skipped node received.
    assert read_slot(chain.resolve("slots/archive_input.json"))["data"] == {"n": 1}


def test_a_join_runs_once_after_every_source_settled(write_chain) -> None:
    chain = build(write_chain,
                  [node("a", start=True, executor=py("ok")), node("b", start=True, executor=py("ok")),
                                node("slow", executor=py("ok")), node("join", executor=py("ok"))],
                  [route("a", "join"), route("b", "slow"), route("slow", "join")])
    schedule, ran, _ = run_plain(chain)
    assert ran.count("join") == 1 and ran.index("join") > ran.index("slow")
    assert states(schedule)["join"] == "Completed"
    # Both sources are kept, keyed by source node id; `data` (what the callable got) is their merge.
    joined = read_slot(chain.resolve("slots/join_input.json"))
    assert {source: entry["data"] for source, entry in joined["sources"].items()} == {"a": {"n": 1},
                                                                                      "slow": {"n": 2}}
    assert joined["sources"]["a"]["route_id"] == "a-to-join" and joined["data"] == {"n": 2}
    assert read_slot(chain.resolve("slots/join_output.json"))["data"] == {"n": 3}

    # A second run starts the join afresh: sources consumed by its last run are not carried over.
    _, ran, _ = run_plain(chain, start=["a"])
    assert ran == ["a", "join"]
    assert list(read_slot(chain.resolve("slots/join_input.json"))["sources"]) == ["a"]


def test_fail_stops_its_branch_and_a_person_decides_before_the_run_ends(write_chain) -> None:
    chain = build(write_chain, [node("a", start=True, executor=py("broken")), node("b", executor=py("ok")),
                                node("c", start=True, executor=py("ok"))], [route("a", "b")])
    schedule, ran, asked = run_plain(chain, decisions={"a": ["terminate"]})
    # The rest of the run went on first; a person was asked once nothing else could run.
    assert sorted(ran) == ["a", "c"] and asked == ["a"]
    assert states(schedule) == {"a": "Failed", "b": "NotRun", "c": "Completed"}
    summary = schedule.summary(None)
    assert summary["state"] == "FAILED" and len(summary["alerts"]) == 1
    assert summary["nodes"]["a"]["error_type"] == "bad_input"


def test_a_fail_decided_with_continue_leads_on(write_chain) -> None:
    chain = build(write_chain, [node("a", start=True, executor=py("broken")), node("b", executor=py("ok"))],
                  [route("a", "b")])
    schedule, ran, asked = run_plain(chain, decisions={"a": ["continue:by hand"]})
    assert ran == ["a", "b"] and asked == ["a"]
    assert states(schedule) == {"a": "Completed", "b": "Completed"}
    assert schedule.summary(None)["state"] == "COMPLETED"


def test_an_undeclared_error_is_arbitrated_and_continue_with_data_routes_on(write_chain) -> None:
    chain = build(write_chain, [node("a", start=True, executor=py("mystery")), node("b", executor=py("ok"))],
                  [route("a", "b")])
    schedule, ran, asked = run_plain(chain, decisions={"a": ["continue:by hand"]})
    assert ran == ["a", "b"] and asked == ["a"]
    assert states(schedule) == {"a": "Completed", "b": "Completed"}
    assert read_slot(chain.resolve("slots/b_output.json"))["data"] == {"given": "by hand", "n": 1}


def test_retry_then_terminate_and_an_escalation_is_asked_before_the_run_ends(write_chain) -> None:
    chain = build(write_chain, [node("f", start=True, executor=py("flaky"),
                                     retry={"max_retries": 3, "retry_interval_seconds": 0}),
                                node("other", start=True, executor=py("ok"))], [])
    schedule, ran, asked = run_plain(chain, decisions={"f": ["retry", "terminate"]})
    # flaky allows 1 retry of its type (2 attempts) before escalating, though the node's R is 3.
    assert runs(chain).count("flaky") == 4 and asked == ["f", "f"]
    assert "other" in ran and states(schedule)["other"] == "Completed"
    assert schedule.terminated == "terminated by a decision on f" and schedule.summary(
        None)["state"] == "FAILED"


def test_retry_book_counts_each_type_within_its_own_max_retries(write_chain) -> None:
    chain = build(write_chain, [node("a", start=True)], [], error_types=[
        {"error_type": "one", "handling": "retry", "max_retries": 1},
        {"error_type": "two", "handling": "retry", "max_retries": 2,
         "escalate_after": "max_retries_exceeded"}])
    book = RetryBook()
    seen = [book.failed("run-1", chain, NodeError(t, "m"), attempt=i, retries=9)
            for i, t in enumerate(["two", "one", "two", "two"], start=1)]
    assert seen == ["retry", "retry", "retry", "escalate"]
    assert book.failed("run-2", chain, NodeError("one", "m"), attempt=1, retries=0) == "fail"


def test_resume_runs_only_what_the_slots_do_not_say_is_done(write_chain) -> None:
    chain = build(write_chain, [node("a", start=True, executor=py("ok")), node("b", executor=py("ok")),
                                node("f", executor=py("flaky"),
                                     retry={"max_retries": 1, "retry_interval_seconds": 0})],
                  [route("a", "b"), route("b", "f")])
    first, _, _ = run_plain(chain, decisions={"f": ["terminate"]})
    assert states(first)["f"] == "Failed" and runs(chain) == ["ok", "ok", "flaky", "flaky"]
    (chain.base_dir / "flaky.ok").touch()
    again, ran, _ = run_plain(chain, resume=True)
    assert ran == ["f"] and runs(chain)[4:] == ["flaky"]
    assert again.summary(None)["state"] == "COMPLETED"
    assert states(again) == {"a": "Completed", "b": "Completed", "f": "Completed"}

    # Touching b's input changes nothing: b's output was made from these very bytes.
    later = time.time() + 5
    os.utime(chain.resolve("slots/b_input.json"), (later, later))
    _, ran, _ = run_plain(chain, resume=True)
    assert ran == []
    # New input for b: b runs again, and f after it.
    write_json_atomic(chain.resolve("slots/b_input.json"),
                      {**read_slot(chain.resolve("slots/b_input.json")), "data": {"n": 7}})
    _, ran, _ = run_plain(chain, resume=True)
    assert ran == ["b", "f"]


def test_a_crash_between_an_output_and_its_routes_is_routed_again_on_resume(write_chain) -> None:
    chain = build(write_chain, [node("a", start=True, executor=py("source")), node("b", executor=py("ok")),
                                node("c", executor=py("ok"))], [route("a", "b"), route("b", "c")])
    (chain.base_dir / "value.txt").write_text("1")
    run_plain(chain)
    assert read_slot(chain.resolve("slots/c_output.json"))["data"] == {"n": 3}
    # A second run: a writes its output for new content, and the process dies before a's routes are
    # written. Every slot after a still holds the first run's work, each consistent with the one before.
    (chain.base_dir / "value.txt").write_text("10")
    execute_node(chain, "a")
    _, ran, _ = run_plain(chain, resume=True)
    assert ran == ["b", "c"], "b's input was not made from a's output now there: b and c have work"
    assert read_slot(chain.resolve("slots/c_output.json"))["data"] == {"n": 12}


def test_an_input_slot_with_new_content_is_new_work_whatever_its_write_time(write_chain) -> None:
    chain = build(write_chain, [node("a", start=True, executor=py("ok")), node("b", executor=py("ok"))],
                  [route("a", "b")])
    run_plain(chain)
    # New content for b, with a write time older than b's output (a copy that kept its times, a clock set
    # back): b's output was not made from it.
    path = chain.resolve("slots/b_input.json")
    write_json_atomic(path, {**read_slot(path), "data": {"n": 41}})
    earlier = os.stat(chain.resolve("slots/b_output.json")).st_mtime - 60
    os.utime(path, (earlier, earlier))
    _, ran, _ = run_plain(chain, resume=True)
    assert ran == ["b"] and read_slot(chain.resolve("slots/b_output.json"))["data"] == {"n": 42}


def test_a_run_started_again_after_a_suspend_asks_instead_of_running_the_node_again(write_chain) -> None:
    chain = build(write_chain, [node("a", start=True, executor=py("ok")), node("m", executor=py("mystery")),
                                node("b", executor=py("ok"))], [route("a", "m"), route("m", "b")])
    schedule, ran, _ = run_plain(chain, decisions={"m": ["terminate"]})
    assert ran == ["a", "m"]
    outcome = schedule.outcomes["m"]
    paused = write_test_alert(chain, outcome, "suspended", flow_run_id="suspended-run", status="paused")
    from slotrelay.chain.alerts import alerts_of_run

    again = ChainSchedule(chain, notes=LOG)
    again.take_back(alerts_of_run(chain.work_dir / "alerts", "suspended-run"))
    again_schedule, ran, asked = run_plain(chain, schedule=again, decisions={"m": ["continue:decided"]})
    assert ran == ["b"] and asked == ["m"] and str(paused) in again_schedule.alerts
    assert states(again_schedule) == {"a": "Completed", "m": "Completed", "b": "Completed"}


def test_a_rework_loop_bounded_at_3_escalates_on_the_4th_firing(write_chain) -> None:
    rework = {"field": "data.verdict", "operator": "equals", "value": "rework"}
    chain = build(write_chain, [node("draft", start=True, executor=py("ok")), node("work", executor=py("ok")),
                                node("review", executor=py("review")), node("publish", executor=py("ok"))],
                  [route("draft", "work"), route("work", "review"),
                   route("review", "work", condition=rework, max_iterations=3),
                   route("review", "publish",
                         condition={"field": "data.verdict", "operator": "equals", "value": "ok"})])
    schedule, ran, asked = run_plain(chain, decisions={"review": ["continue"]})
    assert ran == ["draft"] + ["work", "review"] * 4
    assert asked == ["review"]
    summary = schedule.summary(None)
    assert summary["routes"]["review-to-work"]["fired"] is False
    assert "reached its max_iterations (3) and fired again" in summary["routes"]["review-to-work"]["reason"]
    assert states(schedule) == {"draft": "Completed", "work": "Completed", "review": "Completed",
                                "publish": "NotRun"}
    [alert] = summary["alerts"]
    from slotrelay.chain.alerts import read_alert

    assert read_alert(alert).error_type == "loop_bound_exceeded"
    # The work node was sent back with the review's data.
    sent_back = read_slot(chain.resolve("slots/work_input.json"))
    assert (sent_back["route_id"], sent_back["data"]) == ("review-to-work", {"verdict": "rework", "draft": 1})
    # The loop's firings are counted in the slots inside it, not in the run's memory.
    assert sent_back["loops"] == {"review-to-work": 3}


def test_validate_refuses_a_cycle_without_a_bound(write_chain) -> None:
    import pytest

    from slotrelay.chain import ChainValidationError

    with pytest.raises(ChainValidationError, match="cycle: "):
        build(write_chain, [node("a", start=True, executor=py("ok")), node("b", executor=py("ok")),
                            node("c", executor=py("ok"))],
                            [route("a", "b"), route("b", "c"), route("c", "b")])


def test_an_input_slot_that_cannot_be_written_fails_its_target_with_slot_unwritable(write_chain) -> None:
    chain = build(write_chain, [node("a", start=True, executor=py("ok")),
                                node("b", executor=py("ok"), input_slot={"slot_id": "b-in",
                                                                          "path": "blocked/b_input.json"})],
                  [route("a", "b")])
    # A file where b's input slot folder should be: the route's write fails (L2), after L1/L2 were checked.
    (chain.base_dir / "blocked").write_text("not a folder")
    schedule, ran, asked = run_plain(chain, decisions={"b": ["terminate"]})
    assert ran == ["a"] and asked == ["b"]
    assert states(schedule)["b"] == "Failed" and schedule.summary(None)["nodes"]["b"]["error_type"] == \
        "slot_unwritable"
    from slotrelay.chain.alerts import read_alert

    [alert] = schedule.alerts
    assert (read_alert(alert).error_type, read_alert(alert).handling) == ("slot_unwritable", "arbitrate")


def test_only_an_input_slot_a_resume_writes_again_is_written_without_fsync(write_chain, monkeypatch) -> None:
    """The durability contract (CONTRACTS.md#files-the-product-writes): a route's input slot for a
    python, command, deploy or pen node is rebuilt by `run --resume` from its source's output, so it is
    renamed into place unsynced; outputs, an agent's input, a join's and a rework loop's are fsynced."""
    chain = load_chain(write_chain({"chain_id": "durable", "nodes": [
        node("a", start=True, executor=py("ok")), node("b", executor=py("ok")), node("agent")],
        "routes": [route("a", "b"), route("a", "agent")]}))
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)

    def syncs(write: Any) -> list[str]:
        synced.clear()
        apply_write(chain, write)
        return list(synced)

    def to(target: str, **extra: Any) -> WriteInput:
        document = input_slot_document(from_node="a", route_id=f"a-to-{target}", data={"n": 1},
                                       from_output="sha256:" + "ab" * 32, **extra)
        path = chain.resolve(f"slots/{target}_input.json")
        return WriteInput(f"a-to-{target}", "a", target, path, document)

    assert syncs(to("b")) == [], "a python node's routed input: renamed into place, not fsynced"
    assert read_slot(chain.resolve("slots/b_input.json"))["data"] == {"n": 1}
    assert syncs(to("agent")), "an agent's input slot (another process reads it)"
    assert syncs(to("b", loops={"b-to-a": 1})), "an input inside a rework loop (its count lives nowhere else)"
    joined = to("b")
    assert syncs(WriteInput(joined.route_id, "a", "b", joined.path,
                            {**joined.document, "sources": {"a": {"data": {"n": 1}}}})), "a join's sources"
    assert syncs(WriteOutput("a", output_slot_document("a", status="completed", data={}))), "an output slot"


def agent_answers(chain, node_id: str, data: dict[str, Any]) -> None:
    """An external agent writes its output slot (as a file outside the engine would appear)."""
    write_json_atomic(chain.resolve(f"slots/{node_id}_output.json"),
                      output_slot_document(node_id, status="completed", data=data, capabilities_used=[]))


def watch_run(chain, start: list[str], decisions: dict[str, list[str]] | None = None):
    """A run as `watch` starts one (deployments/sensor.py): it stops at external nodes and resumes."""
    return run_plain(chain, start=start, decisions=decisions,
                     schedule=ChainSchedule(chain, notes=LOG, stop_at_external=True, resume=True))


@pytest.mark.parametrize("sensor_first", [True, False], ids=["sensor-first", "successor-first"])
def test_an_agents_answer_is_acted_on_once_when_a_successor_and_the_sensor_both_meet_it(
    write_chain, sensor_first: bool) -> None:
    """A stopped `watch` leaves a successor of each run it cancelled (deployments/serve.py); an answer the
    agent writes before the successor runs is the sensor's to route, never the successor's as well:
    here the reviewer's answer past the loop's bound must raise one alert and ask a person once."""
    from slotrelay.chain.alerts import read_alert
    from slotrelay.chain.sensor.router import ChainRouter

    rework = {"field": "data.verdict", "operator": "equals", "value": "rework"}
    agent = {"kind": "external"}
    chain = build(write_chain, [node("draft", start=True, executor=agent), node("work", executor=py("ok")),
                                node("review", executor=agent)],
                  [route("draft", "work"), route("work", "review"),
                   route("review", "work", condition=rework, max_iterations=1)])
    sensor = ChainRouter(chain.source, chain=chain)
    agent_answers(chain, "draft", {"n": 0})
    assert [e.to_node for e in sensor.route_output("draft")] == ["work"]
    assert watch_run(chain, ["work"])[1] == ["work"]
    agent_answers(chain, "review", {"verdict": "rework"})
    assert [e.to_node for e in sensor.route_output("review")] == ["work"]
    assert watch_run(chain, ["work"])[1] == ["work"]
    # That run was cancelled by a stop after its work node (its successor starts at work again, resuming),
    # and the reviewer answered again: the second firing is past the bound.
    agent_answers(chain, "review", {"verdict": "rework"})

    def sensor_routes() -> list[str]:
        handed = sensor.route_output("review")
        assert [(e.route_id, e.to_node) for e in handed] == [("engine:review", "review")]
        return watch_run(chain, ["review"], decisions={"review": ["terminate"]})[2]

    if sensor_first:
        asked_by_sensor = sensor_routes()
    successor, ran, asked_by_successor = watch_run(chain, ["work"], decisions={"review": ["terminate"]})
    if not sensor_first:
        asked_by_sensor = sensor_routes()

    assert (ran, asked_by_successor, asked_by_sensor) == ([], [], ["review"])
    assert states(successor)["review"] == "NotRun"
    [bound] = [read_alert(p) for p in sorted((chain.work_dir / "alerts").glob("alert-*.json"))]
    assert bound.error_type == "loop_bound_exceeded"
