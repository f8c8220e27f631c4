"""Issue 30 on the session's real Prefect server: under `watch`, the same routing step as in `run`.

One `slotrelay watch` serves three chains; a separate process writes the agents' slots (agent_proc.py):
- a join of two agents' nodes runs once, after both, with both sources' data, though `watch` is stopped
  and started again between the two writes (what the join has received is in its input slot);
- a rework loop bounded at 2 fires twice, and its third firing is a `loop_bound_exceeded` alert (the
  count is in the slots inside the loop);
- an external node whose pre_execution check never holds does not get its input slot: an alert says why.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from slotrelay.chain.alerts import read_alert
from slotrelay.chain.ledger import LEDGER_FILE_NAME
from slotrelay.chain.slots import read_slot

from .test_deployment_path import ROOT, wait_for

pytestmark = pytest.mark.prefect_server
HERE = Path(__file__).parent
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
ALWAYS = {"field": "status", "operator": "equals", "value": "completed"}


def input_slot(node_id: str) -> dict:
    return {"slot_id": f"{node_id}-in", "path": f"slots/{node_id}_input.json"}


def agent_node(node_id: str, *, start: bool = False, **extra) -> dict:
    return {"node_id": node_id, "output_slot": {"slot_id": node_id, "path": f"slots/{node_id}_output.json"},
            **({} if start else {"input_slot": input_slot(node_id)}),
            "capabilities": ["Write"], "executor": {"kind": "external"}, **extra}


def python_node(node_id: str, function: str) -> dict:
    return {"node_id": node_id, "input_slot": input_slot(node_id),
            "output_slot": {"slot_id": node_id, "path": f"slots/{node_id}_output.json"},
            "executor": {"kind": "python", "callable": f"steps:{function}"}}


def route(source: str, target: str, condition: dict | None = None, **extra) -> dict:
    return {"route_id": f"{source}-to-{target}", "from_node": source, "to_node": target,
            "condition": condition or ALWAYS, **extra}


def write_chain(folder: Path, chain_id: str, nodes: list, routes: list) -> Path:
    folder.mkdir(parents=True)
    (folder / "steps.py").write_text(STEPS)
    path = folder / "node_chain.json"
    path.write_text(json.dumps({"chain_id": chain_id, "nodes": nodes, "routes": routes}))
    return path


def agent(folder: Path, node_id: str, data: dict) -> None:
    document = {"node_id": node_id, "status": "completed", "data": data, "capabilities_used": ["Write"]}
    slot = folder / "slots" / f"{node_id}_output.json"
    subprocess.run([sys.executable, str(HERE / "agent_proc.py"), str(slot), json.dumps(document)], check=True,
                   timeout=60)


def ran(folder: Path) -> list[str]:
    path = folder / "ran.txt"
    return path.read_text().split() if path.exists() else []


def reviewed(folder: Path) -> int:
    """The draft number the reviewer is asked about now (0: not asked yet)."""
    return ((read_slot(folder / "slots" / "review_input.json") or {}).get("data") or {}).get("draft", 0)


def alerts(folder: Path) -> list:
    return [read_alert(p) for p in sorted((folder / "alerts").glob("alert-*.json"))]


def ledger(folder: Path) -> list[dict]:
    path = folder / LEDGER_FILE_NAME
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def start_watch(chains: list[Path], log: Path, api: str, *options: str) -> subprocess.Popen:
    with log.open("w") as handle:
        watch = subprocess.Popen(
            [sys.executable, "-m", "slotrelay.cli", "watch", *options, *map(str, chains)],
            cwd=ROOT, env={**os.environ, "PREFECT_API_URL": api, "COLUMNS": "200"},
            stdout=handle, stderr=subprocess.STDOUT)
    wait_for(lambda: "watching" in log.read_text() or watch.poll() is not None, 90, "watch to start")
    assert watch.poll() is None, log.read_text()
    return watch


def stop_watch(watch: subprocess.Popen, log: Path) -> None:
    watch.send_signal(signal.SIGINT)
    try:
        code = watch.wait(timeout=90)
    except subprocess.TimeoutExpired:
        # Killed so that one watch that missed its stop does not outlive this test into the next ones.
        watch.kill()
        watch.wait()
        raise AssertionError(f"watch did not stop on SIGINT:\n{log.read_text()}") from None
    assert code == 0, log.read_text()


def test_joins_loop_bounds_and_pre_checks_follow_the_routing_step_under_watch(prefect_server, tmp_path):
    joined, looped, checked = tmp_path / "joined", tmp_path / "looped", tmp_path / "checked"
    rework = {"field": "data.verdict", "operator": "equals", "value": "rework"}
    chains = [
        write_chain(joined, "we-join", [agent_node("a", start=True), agent_node("b", start=True),
                                        python_node("j", "join")],
                    [route("a", "j"), route("b", "j")]),
        write_chain(looped, "we-loop", [agent_node("draft", start=True), python_node("work", "work"),
                                        agent_node("review")],
                    [route("draft", "work"), route("work", "review"),
                     route("review", "work", rework, max_iterations=2)]),
        write_chain(checked, "we-check", [
            agent_node("seed", start=True),
            agent_node("ext", check_rules={"pre_execution": [{"field_equals": ["data.approved", True]}]})],
            [route("seed", "ext")]),
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
        wait_for(lambda: any(e.get("route_id") == "a-to-j" for e in ledger(joined)), 60, "a's route")
        waiting = read_slot(joined / "slots" / "j_input.json")
        assert (waiting["status"], waiting["waiting_for"]) == ("waiting", ["b"])
        # The loop: each answer of the reviewer sends the draft back, within the bound.
        for draft in (1, 2):
            wait_for(lambda draft=draft: reviewed(looped) == draft, 180, f"review to get draft {draft}")
            agent(looped, "review", {"verdict": "rework"})
        wait_for(lambda: reviewed(looped) == 3, 180, "review to get draft 3, within the loop's second firing")
        assert read_slot(looped / "slots" / "review_input.json")["loops"] == {"review-to-work": 2}
        stop_watch(watch, log)
        assert ran(joined) == [], "j did not run on a's data alone"

        watch = start_watch(chains, log, prefect_server)
        # b's answer and the reviewer's third at once: the join's run and the loop's go on side by side.
        agent(joined, "b", {"from_b": 2})
        agent(looped, "review", {"verdict": "rework"})
        wait_for(lambda: (read_slot(joined / "slots" / "j_output.json") or {}).get("status") == "completed",
                 180, "the join to run")
        assert read_slot(joined / "slots" / "j_output.json")["data"] == {"seen": {"from_a": 1, "from_b": 2}}
        # Past the bound: the third firing does not loop, a person is asked.
        wait_for(lambda: any(a.error_type == "loop_bound_exceeded" for a in alerts(looped)), 180,
                 "the loop bound's alert")
        [bound] = alerts(looped)
        assert (bound.node_id, bound.handling) == ("review", "arbitrate")
        assert "reached its max_iterations (2)" in bound.message
        # The pre_execution check never held: ext's input slot was never written, and an alert says why.
        wait_for(lambda: alerts(checked), 180, "the pre_execution check's alert")
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
