"""One-file updates of a networkx-sized tree equal full rebuilds, edit after edit (`slow`: minutes).

`test_psmr_incremental.py` proves each kind of edit on a fresh copy of a 25-module package, each checked
against a full rebuild of its own; this is the same on the installed networkx (about 580 files), where a
replay reaches far more of the tree, with the edits made one after another to one copy, as an agent's
session does: a new function no other code reaches, a changed body, a new function, a changed import, a
removed function that other files import.

Each update starts from the workspace the previous one left, so a full rebuild after an edit checks every
update before it too: two rebuilds (after the first three edits, and after the last two) check all five,
where a rebuild per edit took 60% of the test's time. A full rebuild of networkx is about 20 CPU-s; an
update 1-22. Each rebuild runs in a `slotrelay psmr build` process of its own on a copy of the tree as the
edit left it, started as soon as the edit is made, while this process updates and goes on to the next
edits (`full_rebuild_started`): a second core makes it meanwhile instead of the update chain waiting
for it. What the update left is read at once (`workspace_view`), before the next update replaces it.
"""

from __future__ import annotations

import shutil
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import networkx
import pytest
from psmr_rebuild import FullRebuild, full_rebuild_started, replaying, workspace_view

from slotrelay.psmr.api import build_workspace

# A build, five updates and two full rebuilds of networkx: about 130 CPU-s, which a machine with a load
# of 15 on 2 cores may stretch tenfold; the suite's 600 s bound on a hung test is too short for it.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

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


# The edits after which the updated workspace is checked against a full rebuild: the first three (the
# changed body and the new function in utils/misc.py, which most of networkx imports, reach furthest),
# then the last two (the removed function is imported by other files).
CHECKED_AFTER = (_new_def, _removed_def)


def test_one_file_updates_of_networkx_equal_full_rebuilds_edit_after_edit(tmp_path: Path) -> None:
    root = tmp_path / "networkx"
    shutil.copytree(Path(networkx.__file__).parent, root, ignore=shutil.ignore_patterns("__pycache__"))
    store = tmp_path / "inc"
    checks: list[tuple[FullRebuild, dict[str, Any], dict[str, Any]]] = []
    with replaying() as kept, ExitStack() as rebuilds:
        first = build_workspace(root, store=store, kept=kept)
        # The edits accumulate: each update starts from the previous one's workspace.
        for edit in (_leaf_def, _body_change, _new_def, _changed_import, _removed_def):
            edit(root)
            if edit in CHECKED_AFTER:
                folder = tmp_path / f"full{edit.__name__}"
                rebuild = rebuilds.enter_context(full_rebuild_started(root, store, folder))
            update = build_workspace(root, store=store, kept=kept)
            assert update["analysed"] == 1, (edit.__name__, update)
            # Replayed (however far it reaches), not resolved or assembled in full.
            assert update["resolved_sites"] < first["resolved_sites"], (edit.__name__, update, first)
            assert update["assembled_modules"] < first["assembled_modules"], (edit.__name__, update, first)
            if edit is _leaf_def:
                # Nothing else reaches the new function: the replay resolves no other call site again,
                # and only the edited module's part of the graph is assembled again.
                assert update["resolved_sites"] <= 2 and update["assembled_modules"] == 1, update
            if edit in CHECKED_AFTER:
                checks.append((rebuild, update, workspace_view(store, update["workspace_id"])))
        for rebuild, update, updated in checks:
            rebuild.assert_equals(update, updated)
