"""Chain documents built in a test from dicts (`node`, `route`), and where the example chain lives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "phase2"


def node(node_id: str, *, start: bool = False, **extra: Any) -> dict[str, Any]:
    """A minimal node dict: slots under `slots/`, a python executor unless `executor` is given."""
    spec: dict[str, Any] = {
        "node_id": node_id,
        "input_slot": None if start else {"slot_id": f"{node_id}-in", "path": f"slots/{node_id}_input.json"},
        "output_slot": {"slot_id": node_id, "path": f"slots/{node_id}_output.json"},
    }
    spec.update(extra)
    return spec


def route(source: str, target: str, **extra: Any) -> dict[str, Any]:
    """A route that holds when the source completed."""
    spec: dict[str, Any] = {
        "route_id": f"{source}-to-{target}",
        "from_node": source,
        "to_node": target,
        "condition": {"field": "status", "operator": "equals", "value": "completed"},
    }
    spec.update(extra)
    return spec
