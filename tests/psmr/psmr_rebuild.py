"""A one-file update of a workspace, checked against the workspace a full rebuild of the same tree makes.

A module of its own (not `conftest`), imported by a name no other test folder uses; only tests/psmr uses it.
The builds are given resolutions to keep, as the MCP server's are, so an update replays the last one
where the edit reaches (`relink`); the limit on that reach, past which a build resolves in full
instead, is lifted, so that every edit is replayed.

The full rebuild runs in the test's process (`assert_update_equals_full_rebuild`), or, where a test goes
on editing and updating meanwhile, in a `slotrelay psmr build` process of its own on a copy of the tree
as it was (`full_rebuild_started`), so that a second core makes it while the first goes on.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.commands import SLOTRELAY
from slotrelay.psmr.analysis import relink
from slotrelay.psmr.api import build_workspace
from slotrelay.psmr.workspace.kept import KeptResolutions
from slotrelay.psmr.workspace.store import Store


@contextmanager
def replaying() -> Iterator[KeptResolutions]:
    """The resolutions to give the builds in this block (`kept=`), which replay them however far an
    edit reaches."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(relink, "MAX_AGAIN_SHARE", 1.0)
        yield KeptResolutions()


def workspace_view(store: Path, workspace_id: str) -> dict[str, Any]:
    """What the store holds of a workspace: its graph parts (named by their content), its nodes and
    edges with their data in the order they are stored (and walked: `edges_from` keeps it), its
    evidence, unknowns and conflicts. Taken before a later update of the same workspace replaces it."""
    ws = Store.open(store).load(workspace_id)
    return {
        "parts": sorted(path.name for path in (store / "workspaces" / workspace_id / "parts").iterdir()),
        "nodes": list(ws.nodes.items()),
        "edges": list(ws.edges.items()),
        "evidence": ws.evidence,
        "unknowns": ws.unknowns,
        "conflicts": ws.conflicts,
    }


def _assert_equal_views(
    update: dict[str, Any], updated: dict[str, Any], full: dict[str, Any], rebuilt: dict[str, Any]
) -> None:
    # Replayed (it may reach most of the tree: the limit is lifted), not resolved in full.
    assert update["resolved_sites"] < full["resolved_sites"], (update, full)
    assert update["assembled_modules"] < full["assembled_modules"], (update, full)
    for key, value in rebuilt.items():
        assert updated[key] == value, f"the update's {key} are not the full rebuild's"


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
    updated = workspace_view(store, update["workspace_id"])
    _assert_equal_views(update, updated, full, workspace_view(full_store, full["workspace_id"]))


@dataclass
class FullRebuild:
    """A full rebuild running in a process of its own (`full_rebuild_started`)."""

    process: subprocess.Popen[bytes]
    folder: Path

    def assert_equals(self, update: dict[str, Any], updated: dict[str, Any]) -> None:
        """`updated` (the `workspace_view` of the workspace `update` left, taken before any later
        update) is the workspace this rebuild makes, as `assert_update_equals_full_rebuild` checks."""
        code = self.process.wait()
        assert code == 0, (self.folder / "stderr").read_text()
        full = json.loads((self.folder / "summary.json").read_text())
        _assert_equal_views(
            update, updated, full, workspace_view(self.folder / "store", full["workspace_id"])
        )


@contextmanager
def full_rebuild_started(root: Path, store: Path, folder: Path) -> Iterator[FullRebuild]:
    """A full rebuild of `root` as it is now, by `slotrelay psmr build` in `folder`: on a copy of the
    tree (the caller goes on editing `root`), into a store holding only a copy of `store`'s per-file
    facts, as in `assert_update_equals_full_rebuild`. Killed if the block ends before it does."""
    tree = folder / "tree" / root.name
    shutil.copytree(root, tree)
    shutil.copytree(store / "facts", folder / "store" / "facts")
    command = [SLOTRELAY, "psmr", "build", str(tree), "--store", str(folder / "store"), "--json"]
    with (folder / "summary.json").open("wb") as out, (folder / "stderr").open("wb") as err:
        process = subprocess.Popen(command, stdout=out, stderr=err)
    try:
        yield FullRebuild(process, folder)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
