"""Chains the sensor tests write to a folder for `watch` (agents' nodes, python steps from the folder's
`steps.py`), and what a run left in that folder: the steps that ran, the routing ledger."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from harness.chains import whole_json_lines
from slotrelay.chain.ledger import LEDGER_FILE_NAME

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


def write_chain(folder: Path, chain_id: str, nodes: list, routes: list, steps: str) -> Path:
    """The chain in a new `folder`, with `steps` (Python source) as its `steps.py`."""
    folder.mkdir(parents=True)
    (folder / "steps.py").write_text(steps)
    path = folder / "node_chain.json"
    path.write_text(json.dumps({"chain_id": chain_id, "nodes": nodes, "routes": routes}))
    return path


def ran(folder: Path) -> list[str]:
    """The steps that ran in `folder`, in order (each step notes its name in `ran.txt`)."""
    path = folder / "ran.txt"
    return path.read_text().split() if path.exists() else []


def ledger(folder: Path) -> list[dict]:
    path = folder / LEDGER_FILE_NAME
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def ledger_lines(folder: Path) -> list[dict]:
    """The ledger's entries, but a line not (yet) whole, which a writer killed mid-line leaves."""
    return whole_json_lines(folder / LEDGER_FILE_NAME)


def routed_keys(folder: Path) -> Counter:
    """How many times each (chain, route, source hash) was routed."""
    return Counter(
        (r["chain_id"], r["route_id"], r["source_hash"]) for r in ledger_lines(
            folder) if r["kind"] == "routed"
    )
