"""A one-file update of a workspace, checked against the workspace a full rebuild of the same tree makes.

A module of its own (not `conftest`), imported by a name no other test folder uses, as `psmr_trees` is.
The builds are given resolutions to keep, as the MCP server's are, so an update replays the last one
where the edit reaches (`relink`); the limit on that reach, past which a build resolves in full
instead, is lifted, so that every edit is replayed.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from slotrelay.psmr.analysis import relink
from slotrelay.psmr.api import build_workspace
from slotrelay.psmr.workspace.kept import KeptResolutions
from slotrelay.psmr.workspace.store import Store, Workspace


@contextmanager
def replaying() -> Iterator[KeptResolutions]:
    """The resolutions to give the builds in this block (`kept=`), which replay them however far an
    edit reaches."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(relink, "MAX_AGAIN_SHARE", 1.0)
        yield KeptResolutions()


def _graph(ws: Workspace) -> tuple[list, list]:
    """The nodes and edges with their data, in the order a reader walks them."""
    return list(ws.graph.nodes(data=True)), list(ws.graph.edges(keys=True, data=True))


def _parts(store: Path, workspace_id: str) -> list[str]:
    """The graph parts a store holds for a workspace (named by their content)."""
    return sorted(path.name for path in (store / "workspaces" / workspace_id / "parts").iterdir())


def assert_update_equals_full_rebuild(
    root: Path, store: Path, update: dict[str, Any], full_store: Path
) -> None:
    """The workspace `update` left in `store` is the one a full rebuild of `root` makes in `full_store`.

    The same nodes and edges with their data, in the same order, the same evidence, unknowns and
    conflicts, stored as the same graph parts (and no stale one). The full rebuild starts from an empty
    store except for the per-file facts (copied, so that it does not pay for parsing every file again):
    everything the update may reuse beyond facts is built again.
    """
    shutil.copytree(store / "facts", full_store / "facts")
    full = build_workspace(root, store=full_store)
    # Replayed (it may reach most of the tree: the limit is lifted), not resolved in full.
    assert update["resolved_sites"] < full["resolved_sites"], (update, full)
    assert update["assembled_modules"] < full["assembled_modules"], (update, full)
    assert _parts(store, update["workspace_id"]) == _parts(full_store, full["workspace_id"])
    updated = Store.open(store).load(update["workspace_id"])
    rebuilt = Store.open(full_store).load(full["workspace_id"])
    assert _graph(updated) == _graph(rebuilt)
    assert (updated.evidence, updated.unknowns, updated.conflicts) == (
        rebuilt.evidence,
        rebuilt.unknowns,
        rebuilt.conflicts,
    )
