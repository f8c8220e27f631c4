"""A bounded rework loop on a real Prefect server: the 4th firing of a loop bounded at 3 asks a person."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from harness.commands import SLOTRELAY
from slotrelay.chain.alerts import read_alert
from tests.support.arbitration import decide, wait_paused
from tests.support.chain_specs import node, route
from tests.support.prefect_api import recorded_task_runs

pytestmark = pytest.mark.prefect_server

STEPS = '''
def draft(data):
    return {"text": "first draft", "round": 0}

def work(data):
    return {"text": data["text"], "round": data.get("round", 0) + 1}

def review(data):
    return {**data, "verdict": "rework"}
'''


def test_a_loop_bounded_at_3_escalates_on_the_4th_firing(prefect_server: str, tmp_path) -> None:
    folder = tmp_path / "loop"
    folder.mkdir()
    (folder / "steps.py").write_text(STEPS)
    python = {"kind": "python"}
    rework = {"field": "data.verdict", "operator": "equals", "value": "rework"}
    (folder / "node_chain.json").write_text(json.dumps({
        "chain_id": "loop",
        "nodes": [node("draft", start=True, executor={**python, "callable": "steps:draft"}),
                  node("work", executor={**python, "callable": "steps:work"}),
                  node("review", executor={**python, "callable": "steps:review"})],
        "routes": [route("draft", "work"), route("work", "review"),
                   route("review", "work", condition=rework, max_iterations=3)],
    }))
    run = subprocess.Popen([SLOTRELAY, "run", str(folder / "node_chain.json"), "--json"],
                           stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env={**os.environ})
    try:
        alert_path = wait_paused(folder, run)
        alert = read_alert(alert_path)
        assert (alert.node_id, alert.error_type, alert.handling) == ("review", "loop_bound_exceeded",
                                                                     "arbitrate")
        assert decide(alert_path, "terminate").returncode == 0
        out, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 1
    summary = json.loads(out)
    assert summary["state"] == "FAILED" and summary["nodes"]["review"]["state"] == "Failed"
    assert json.loads((folder / "slots" / "work_output.json").read_text())["data"]["round"] == 4
    runs = recorded_task_runs([summary["flow_run_id"]], 9)
    names = sorted(r.name for r in runs)
    assert names.count("work") == 4 and names.count("review") == 4 and names.count("draft") == 1
