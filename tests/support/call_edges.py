"""A built workspace's call edges as its tests read them: (caller, callee) -> the statuses of the
edge's call evidence (confirmed, heuristic, ...), both named without the `semantic:` prefix."""

from __future__ import annotations

from pathlib import Path

from slotrelay.psmr.workspace.build import build
from slotrelay.psmr.workspace.store import Store, Workspace
from tests.support.psmr_trees import write_tree


def built(tmp_path: Path, files: dict[str, str] | str) -> Workspace:
    """The workspace of a tree written under `tmp_path` (a one-module tree `m` for a string)."""
    root = write_tree(tmp_path / "tree", {"m.py": files} if isinstance(files, str) else files)
    summary = build(root, store=tmp_path / "store")
    return Store.open(tmp_path / "store").load(summary["workspace_id"])


def call_statuses(ws: Workspace) -> dict[tuple[str, str], set[str]]:
    """(caller, callee) -> the statuses of the call evidence of each `calls` edge."""
    out: dict[tuple[str, str], set[str]] = {}
    for caller, callee, key, data in ws.graph.edges(keys=True, data=True):
        if key == "calls":
            pair = (caller.removeprefix("semantic:"), callee.removeprefix("semantic:"))
            out[pair] = {ws.evidence[ev]["status"] for ev in data["evidence"]}
    return out
