"""Chains with pen nodes (numbers -> summer, and a prober the sandbox refuses; or a summer whose persona
asks a person), a chain run in a thread with the test's Prefect settings, and waiting for it to pause."""

from __future__ import annotations

import contextvars
import json
import threading
from pathlib import Path
from typing import Any

from tests.support.waiting import wait_until


def pen_chain(folder: Path, backend: str | None, *, prober: bool = True) -> Path:
    """numbers (python) -> summer (pen), and with `prober` -> prober (pen, code the sandbox refuses)."""
    (folder / "numbers_node.py").write_text("def numbers(data):\n    return {'numbers': [4, 5, 6]}\n")

    def pen_node(node_id: str, intent: str) -> dict:
        return {
            "node_id": node_id,
            "input_slot": {"slot_id": f"{node_id}-in", "path": f"slots/{node_id}_input.json"},
            "output_slot": {"slot_id": node_id, "path": f"slots/{node_id}_output.json"},
            "executor": {
                "kind": "pen",
                "intent": intent,
                "persona_id": "chain1",
                "options": {
                    "backend": backend,
                    "persist_hint": "keep",
                    "root": "pen-root",
                    "sandbox": {"timeout_ms": 10000},
                },
            },
        }

    chain = {
        "chain_id": "pen-in-a-chain",
        # A failed pen node's alert (MPP-E002, MPP-E005: `fail`) asks a person before the run ends; nobody
        # decides in these tests, so the pause ends after a second and the run fails.
        "pause_timeout_seconds": 1,
        "nodes": [
            {
                "node_id": "numbers",
                "output_slot": {"slot_id": "numbers", "path": "slots/numbers_output.json"},
                "executor": {"kind": "python", "callable": "numbers_node:numbers"},
            },
            pen_node("summer", "sum the numbers in the input list"),
            *([pen_node("prober", "report the hostname of the machine")] if prober else []),
        ],
        "routes": [
            {
                "route_id": f"numbers-to-{target}",
                "from_node": "numbers",
                "to_node": target,
                "condition": {"field": "status", "operator": "equals", "value": "completed"},
            }
            for target in ("summer", "prober")[: 2 if prober else 1]
        ],
        "error_types": [
            {
                "error_type": "MPP-E002",
                "description": "the sandbox could not start (its daemon refused or did not answer)",
                "handling": "fail",
            },
            {
                "error_type": "MPP-E005",
                "description": "the pen's code broke the sandbox rules",
                "handling": "fail",
            },
            {
                "error_type": "MPP-E003",
                "description": "no code from the model",
                "handling": "retry",
                "max_retries": 1,
            },
        ],
    }
    path = folder / "node_chain.json"
    path.write_text(json.dumps(chain, indent=2))
    return path


AFTER = """
def after(data):
    decision = data["x-slotrelay"]["decision"]
    return {"final_action": decision["final_action"], "total": data["execution"]["result"]["total"]}
"""


def person_chain(folder: Path, backend: str | None) -> Path:
    """numbers -> summer (a pen whose persona asks a person) -> after (reads the decided pen)."""
    path = pen_chain(folder, backend, prober=False)
    chain = json.loads(path.read_text())
    chain["chain_id"] = "pen-asks-a-person"
    chain["pause_timeout_seconds"] = 600
    chain["nodes"].append({
        "node_id": "after",
        "input_slot": {"slot_id": "after-in", "path": "slots/after_input.json"},
        "output_slot": {"slot_id": "after", "path": "slots/after_output.json"},
        "executor": {"kind": "python", "callable": "after_node:after"},
    })
    chain["routes"].append({
        "route_id": "summer-to-after", "from_node": "summer", "to_node": "after",
        "condition": {"field": "status", "operator": "equals", "value": "completed"},
    })
    path.write_text(json.dumps(chain, indent=2))
    (folder / "after_node.py").write_text(AFTER)
    brain = folder / "pen-root/.github/persona-brain/chain1"
    brain.mkdir(parents=True)
    (brain / "pen-policy.json").write_text(json.dumps({"mode": "person"}))
    return path


def start_chain(chain_path: Path) -> tuple[threading.Thread, dict[str, Any]]:
    """`run_chain` in a thread (the test's Prefect settings carried into it); its state lands in the dict."""
    from flows.chain import run_chain

    results: dict[str, Any] = {}

    def run() -> None:
        results["state"] = run_chain(str(chain_path), return_state=True)

    worker = threading.Thread(target=contextvars.copy_context().run, args=(run,))
    worker.start()
    return worker, results


def wait_paused(chain_path: Path, worker: threading.Thread, timeout: float = 180) -> Any:
    """The chain's flow run once it is Paused on the server (a run that ends first fails the test)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterState, FlowRunFilterStateType
    from prefect.client.schemas.objects import StateType

    paused = FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.PAUSED])))

    def paused_run() -> Any:
        assert worker.is_alive(), "the chain's run ended without pausing for the person"
        with get_client(sync_client=True) as client:
            runs = [r for r in client.read_flow_runs(flow_run_filter=paused)
                    if r.parameters.get("chain_path") == str(chain_path)]
        return runs[0] if runs else None

    return wait_until(paused_run, timeout=timeout, interval=0.2, what=f"the run of {chain_path} to pause")
