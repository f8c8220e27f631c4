"""Fixtures of the chain-engine tests: a chain document written to a fresh folder, a copy of the example
chain (the chain documents themselves are built with `tests.support.chain_specs`)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.chain_specs import EXAMPLE


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
