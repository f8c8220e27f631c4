"""Issue 30 on the session's real Prefect server: under `watch`, the same routing step as in `run`.

One `slotrelay watch` serves three chains; a separate process writes the agents' slots (agent_proc.py):
- a join of two agents' nodes runs once, after both, with both sources' data, though `watch` is stopped
  and started again between the two writes (what the join has received is in its input slot);
- a rework loop bounded at 2 fires twice, and its third firing is a `loop_bound_exceeded` alert (the
  count is in the slots inside the loop);
- an external node whose pre_execution check never holds does not get its input slot: an alert says why.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from slotrelay.chain.alerts import read_alert
from slotrelay.chain.slots import read_slot
from tests.support.sensor_processes import agent, start_watch, stop_watch
from tests.support.waiting import wait_until
from tests.support.watch_chains import agent_node, ledger, python_node, ran, route, write_chain

pytestmark = pytest.mark.prefect_server
STEPS = '''
import pathlib

HERE = pathlib.Path(__file__).parent


def note(name):
    with (HERE / "ran.txt").open("a") as ran:
        ran.write(name + "\\n")


def join(data):
    note("join")
    return {"seen": data}


def work(data):
    note("work")
    return {"draft": (HERE / "ran.txt").read_text().split().count("work")}
'''
def reviewed(folder: Path) -> int:
    """The draft number the reviewer is asked about now (0: not asked yet)."""
    return ((read_slot(folder / "slots" / "review_input.json") or {}).get("data") or {}).get("draft", 0)


def alerts(folder: Path) -> list:
    return [read_alert(p) for p in sorted((folder / "alerts").glob("alert-*.json"))]


def test_joins_loop_bounds_and_pre_checks_follow_the_routing_step_under_watch(prefect_server, tmp_path):
    joined, looped, checked = tmp_path / "joined", tmp_path / "looped", tmp_path / "checked"
    rework = {"field": "data.verdict", "operator": "equals", "value": "rework"}
    chains = [
        write_chain(joined, "we-join", [agent_node("a", start=True), agent_node("b", start=True),
                                        python_node("j", "join")],
                    [route("a", "j"), route("b", "j")], STEPS),
        write_chain(looped, "we-loop", [agent_node("draft", start=True), python_node("work", "work"),
                                        agent_node("review")],
                    [route("draft", "work"), route("work", "review"),
                     route("review", "work", rework, max_iterations=2)], STEPS),
        write_chain(checked, "we-check", [
            agent_node("seed", start=True),
            agent_node("ext", check_rules={"pre_execution": [{"field_equals": ["data.approved", True]}]})],
            [route("seed", "ext")], STEPS),
    ]
    log = tmp_path / "watch.log"
    # Warm processes, as `watch` keeps by default (forked from one import of Prefect): 39.1 -> 35.0 CPU-s
    # for this file against `--warm 0`.
    watch = start_watch(chains, log, prefect_server)
    try:
        # The three chains' first answers at once: their routes and runs go on side by side.
        agent(joined, "a", {"from_a": 1})
        # The pre_execution check: the agent's seed answer is never what ext may take.
        agent(checked, "seed", {"approved": False})
        agent(looped, "draft", {"draft": 0})
        # The join: a's answer alone does not start j, which waits in its input slot for b.
        wait_until(lambda: any(e.get("route_id") == "a-to-j" for e in ledger(joined)), timeout=60,
                   what="a's route")
        waiting = read_slot(joined / "slots" / "j_input.json")
        assert (waiting["status"], waiting["waiting_for"]) == ("waiting", ["b"])
        # The loop: each answer of the reviewer sends the draft back, within the bound.
        for draft in (1, 2):
            wait_until(lambda draft=draft: reviewed(looped) == draft, timeout=180,
                       what=f"review to get draft {draft}")
            agent(looped, "review", {"verdict": "rework"})
        wait_until(lambda: reviewed(looped) == 3, timeout=180,
                   what="review to get draft 3, within the loop's second firing")
        assert read_slot(looped / "slots" / "review_input.json")["loops"] == {"review-to-work": 2}
        stop_watch(watch, log)
        assert ran(joined) == [], "j did not run on a's data alone"

        watch = start_watch(chains, log, prefect_server)
        # b's answer and the reviewer's third at once: the join's run and the loop's go on side by side.
        agent(joined, "b", {"from_b": 2})
        agent(looped, "review", {"verdict": "rework"})
        wait_until(lambda: (read_slot(joined / "slots" / "j_output.json") or {}).get("status") == "completed",
                   timeout=180, what="the join to run")
        assert read_slot(joined / "slots" / "j_output.json")["data"] == {"seen": {"from_a": 1, "from_b": 2}}
        # Past the bound: the third firing does not loop, a person is asked.
        wait_until(lambda: any(a.error_type == "loop_bound_exceeded" for a in alerts(looped)), timeout=180,
                   what="the loop bound's alert")
        [bound] = alerts(looped)
        assert (bound.node_id, bound.handling) == ("review", "arbitrate")
        assert "reached its max_iterations (2)" in bound.message
        # The pre_execution check never held: ext's input slot was never written, and an alert says why.
        wait_until(lambda: alerts(checked), timeout=180, what="the pre_execution check's alert")
        [refused] = alerts(checked)
        assert (refused.node_id, refused.error_type) == ("ext", "check_failed")
        assert "pre_execution: data.approved is False, expected True" in refused.message
        assert not (checked / "slots" / "ext_input.json").exists()
    finally:
        if watch.poll() is None:
            stop_watch(watch, log)
    assert ran(joined) == ["join"], "the join ran once"
    assert ran(looped) == ["work"] * 3
    assert "a-to-j fired" in (joined / "logs" / "engine.log").read_text()
