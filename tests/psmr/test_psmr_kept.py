"""The resolutions a process keeps (`slotrelay.psmr.workspace.kept`): each process owns its own and hands it
to its builds; a build given none keeps nothing, and the table keeps only the workspaces built last."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotrelay.psmr.workspace.build import build
from slotrelay.psmr.workspace.kept import KeptResolutions
from slotrelay.psmr.workspace.store import Store
from tests.support.psmr_trees import SHAPES, write_tree

# Enough modules that adding a function nothing calls reaches few of the call sites (see
# `slotrelay.psmr.analysis.relink.MAX_AGAIN_SHARE`).
TREE = SHAPES | {f"app/util{i}.py": f"def h{i}(x):\n    return len(str(x))\n" for i in range(30)}
LEAF = "\n\ndef _leaf():\n    return sorted([3, 1, 2])\n"


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def test_a_build_given_nothing_to_keep_resolves_every_update_in_full(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", TREE)
    everything = build(root, store=tmp_path / "store")["resolved_sites"]
    _append(root / "app/util1.py", LEAF)
    update = build(root, store=tmp_path / "store")
    assert update["analysed"] == 1 and update["resolved_sites"] > everything, (update, everything)


def test_a_kept_resolution_is_replayed_and_only_the_last_built_are_kept(tmp_path: Path) -> None:
    first, second = write_tree(tmp_path / "first", TREE), write_tree(tmp_path / "second", TREE)
    store = tmp_path / "store"
    kept = KeptResolutions(1)
    everything = build(first, store=store, kept=kept)["resolved_sites"]
    _append(first / "app/util1.py", LEAF)
    assert build(first, store=store, kept=kept)["resolved_sites"] <= 2
    # A second workspace pushes the first out of a table of one: the first's next update resolves all.
    other = build(second, store=store, kept=kept)["workspace_id"]
    assert len(kept) == 1 and kept.get((str(Store.open(store).path), other)) is not None
    _append(first / "app/util2.py", LEAF)
    assert build(first, store=store, kept=kept)["resolved_sites"] >= everything


def test_a_table_that_keeps_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="count must be at least 1"):
        KeptResolutions(0)
