"""Score the analyzer's call graphs against the corpus's hand-written expected graphs.

Each folder of `corpus/` is one Python feature: its sources and `expected.json`, written from the
language's semantics (what really runs), not from the analyzer's output, so features the analyzer
misses (dynamic calls, calls a builtin makes) count against its recall.
"""

from __future__ import annotations

import json
from pathlib import Path

from slotrelay.psmr.workspace.build import build
from slotrelay.psmr.workspace.export import callgraph
from slotrelay.psmr.workspace.store import Store

CORPUS = Path(__file__).parent / "corpus"


def features() -> list[Path]:
    """The corpus folders, one per feature (tool caches such as .ruff_cache are not features)."""
    return sorted(p for p in CORPUS.iterdir() if p.is_dir() and not p.name.startswith("."))


def edges(graph: dict[str, list[str]]) -> set[tuple[str, str]]:
    """The (caller, callee) pairs of a call graph."""
    return {(caller, callee) for caller, callees in graph.items() for callee in callees}


def score(store: Path) -> dict[str, tuple[int, int, int]]:
    """Per feature: (true positives, edges produced, edges expected)."""
    out = {}
    for folder in features():
        summary = build(folder, store=store / folder.name)
        produced = edges(callgraph(Store.open(store / folder.name).load(summary["workspace_id"])))
        expected = edges(json.loads((folder / "expected.json").read_text()))
        out[folder.name] = (len(produced & expected), len(produced), len(expected))
    return out


def totals(scores: dict[str, tuple[int, int, int]]) -> tuple[float, float]:
    """Micro-averaged precision and recall."""
    tp = sum(s[0] for s in scores.values())
    return tp / sum(s[1] for s in scores.values()), tp / sum(s[2] for s in scores.values())
