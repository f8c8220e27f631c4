"""Chain-engine test helpers: chains built in the test from dicts, and a copy of the example chain."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

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


@pytest.fixture
def write_chain(tmp_path: Path) -> Callable[..., Path]:
    """Write a chain document (and optional helper modules) into a fresh folder; returns the chain path."""
    def write(document: dict[str, Any], modules: dict[str, str] | None = None) -> Path:
        for name, source in (modules or {}).items():
            (tmp_path / name).write_text(source, encoding="utf-8")
        path = tmp_path / "node_chain.json"
        path.write_text(json.dumps(document, indent=2), encoding="utf-8")
        return path

    return write


@pytest.fixture
def example_copy(tmp_path: Path) -> Path:
    """A private copy of examples/phase2 (its runs write slots and work files beside the chain)."""
    target = tmp_path / "phase2"
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns(
        "slots", "work", "alerts", "logs", "__pycache__", ".slotrelay-*"))
    return target / "node_chain.json"
