"""A one-file update on a networkx-sized tree equals a full rebuild, for each kind of edit an agent makes.

The installed networkx (about 580 files) is copied to a temporary folder and edited in turn: a new
function no other code reaches, a changed body, a new function, a changed import, a removed function
that other files import. After each edit the updated workspace must be the workspace built from
scratch: the same nodes and edges with their data, in the same order, the same evidence, unknowns and
conflicts, stored as the same graph parts. The full rebuild starts from an empty store except for the
per-file facts (copied, so the test does not pay for parsing 580 files again): everything the update
may reuse beyond facts is rebuilt. The process keeps its resolutions, as the MCP server does, so an
update replays the last one where the edit reaches (`relink`); the limit on that reach, past which a
build resolves in full instead, is lifted, so that every edit here is replayed.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import networkx
import pytest

from slotrelay.psmr import relink
from slotrelay.psmr.api import build_workspace
from slotrelay.psmr.build import keep_resolved
from slotrelay.psmr.store import Store, Workspace

MISC = "utils/misc.py"
CYCLES = "algorithms/cycles.py"


def _edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text()
    assert old in text, f"{rel} no longer holds {old!r}: pick another edit for this networkx version"
    path.write_text(text.replace(old, new, 1))


def _leaf_def(root: Path) -> None:
    path = root / CYCLES
    path.write_text(path.read_text() + "\n\ndef _leaf():\n    return sorted([3, 1, 2])\n")


def _body_change(root: Path) -> None:
    old = "            result.append(item)\n"
    _edit(root, MISC, old, old.replace("(item)", "(arbitrary_element([item]))"))


def _new_def(root: Path) -> None:
    path = root / MISC
    path.write_text(path.read_text() + "\n\ndef _added(G):\n    return flatten(nx.shortest_path(G, 0, 1))\n")


def _changed_import(root: Path) -> None:
    _edit(
        root,
        CYCLES,
        "from networkx.utils import not_implemented_for, pairwise\n",
        "from networkx.utils import not_implemented_for\nfrom networkx.utils.misc import pairwise as pairs\n",
    )


def _removed_def(root: Path) -> None:
    path = root / MISC
    text = path.read_text()
    start, end = text.index("def pairwise("), text.index("def groups(")
    path.write_text(text[:start] + text[end:])


def _graph(ws: Workspace) -> tuple[list, list]:
    """The nodes and edges with their data, in the order a reader walks them."""
    return list(ws.graph.nodes(data=True)), list(ws.graph.edges(keys=True, data=True))


def _parts(store: Path, workspace_id: str) -> list[str]:
    """The graph parts a store holds for a workspace (named by their content)."""
    return sorted(path.name for path in (store / "workspaces" / workspace_id / "parts").iterdir())


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    work = tmp_path_factory.mktemp("incremental")
    root = work / "networkx"
    shutil.copytree(Path(networkx.__file__).parent, root, ignore=shutil.ignore_patterns("__pycache__"))
    # The update's store and the full rebuild's: the update's resolution is kept across the other.
    keep_resolved(2)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(relink, "MAX_AGAIN_SHARE", 1.0)
        build_workspace(root, store=work / "inc")
        yield root, work
    keep_resolved(0)


@pytest.mark.parametrize(
    "edit",
    [_leaf_def, _body_change, _new_def, _changed_import, _removed_def],
    ids=lambda e: e.__name__.strip("_"),
)
def test_a_one_file_update_equals_a_full_rebuild(tree: tuple[Path, Path], edit) -> None:
    # The edits accumulate in test order: each update starts from the previous one's workspace.
    root, work = tree
    edit(root)
    update = build_workspace(root, store=work / "inc")
    assert update["analysed"] == 1
    if edit is _leaf_def:
        # Nothing else reaches the new function: the replay resolves no other call site again, and
        # only the edited module's part of the graph is assembled again.
        assert update["resolved_sites"] <= 2 and update["assembled_modules"] == 1, update
    full_store = work / f"full-{edit.__name__}"
    shutil.copytree(work / "inc" / "facts", full_store / "facts")
    full = build_workspace(root, store=full_store)
    # Replayed (it may reach most of the tree here: the limit is lifted), not resolved in full.
    assert update["resolved_sites"] < full["resolved_sites"], update
    assert update["assembled_modules"] < full["assembled_modules"], update
    # The same graph, stored the same: the update's parts are the full build's, and no stale one is left.
    assert _parts(work / "inc", update["workspace_id"]) == _parts(full_store, full["workspace_id"])
    inc_ws = Store.open(work / "inc").load(update["workspace_id"])
    full_ws = Store.open(full_store).load(full["workspace_id"])
    assert _graph(inc_ws) == _graph(full_ws)
    assert (inc_ws.evidence, inc_ws.unknowns, inc_ws.conflicts) == (
        full_ws.evidence,
        full_ws.unknowns,
        full_ws.conflicts,
    )
