"""A one-file update of a real package equals a full rebuild, for each kind of edit an agent makes.

Each edit is made to its own fresh copy of the vendored sqlparse 0.6.1 (25 modules that import each
other's helpers; `tests/vendor/`): a new function no other code reaches, a changed body, a new
function, a changed import, a removed function that other files import. The copy is built, edited and
built again by a process that keeps its resolution, so the update replays it (`psmr_rebuild`); the
updated workspace must be the one a full rebuild makes. The same edits on networkx, ten times the
size, are `test_psmr_incremental_networkx.py` (marked `slow`).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from psmr_rebuild import assert_update_equals_full_rebuild, replaying

from slotrelay.psmr.api import build_workspace

SQLPARSE = Path(__file__).resolve().parents[1] / "vendor" / "sqlparse" / "sqlparse"
UTILS = "utils.py"
GROUPING = "engine/grouping.py"
SQL = "sql.py"


def _edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text()
    assert old in text, f"{rel} no longer holds {old!r}"
    path.write_text(text.replace(old, new, 1))


def _leaf_def(root: Path) -> None:
    path = root / GROUPING
    path.write_text(path.read_text() + "\n\ndef _leaf():\n    return sorted([3, 1, 2])\n")


def _body_change(root: Path) -> None:
    # remove_quotes (which sql.py calls) now calls another helper of its module.
    _edit(root, UTILS, "        val = val[1:-1]\n", "        val = split_unquoted_newlines(val[1:-1])[0]\n")


def _new_def(root: Path) -> None:
    path = root / UTILS
    added = "\n\ndef _added(stmt):\n    return remove_quotes(split_unquoted_newlines(stmt)[0])\n"
    path.write_text(path.read_text() + added)


def _changed_import(root: Path) -> None:
    # sql.py's calls of remove_quotes now name nothing it imports.
    _edit(
        root,
        SQL,
        "from sqlparse.utils import imt, remove_quotes\n",
        "from sqlparse.utils import imt\nfrom sqlparse.utils import remove_quotes as unquote\n",
    )


def _removed_def(root: Path) -> None:
    # imt, which sql.py and engine/grouping.py import and call throughout.
    path = root / UTILS
    text = path.read_text()
    start, end = text.index("def imt("), text.index("def consume(")
    path.write_text(text[:start] + text[end:])


@pytest.mark.parametrize(
    "edit",
    [_leaf_def, _body_change, _new_def, _changed_import, _removed_def],
    ids=lambda e: e.__name__.strip("_"),
)
def test_a_one_file_update_equals_a_full_rebuild(tmp_path: Path, edit: Callable[[Path], None]) -> None:
    root = tmp_path / "sqlparse"
    shutil.copytree(SQLPARSE, root, ignore=shutil.ignore_patterns("__pycache__"))
    store = tmp_path / "inc"
    with replaying() as kept:
        build_workspace(root, store=store, kept=kept)
        edit(root)
        update = build_workspace(root, store=store, kept=kept)
        assert update["analysed"] == 1, update
        if edit is _leaf_def:
            # Nothing else reaches the new function: the replay resolves no other call site again, and
            # only the edited module's part of the graph is assembled again.
            assert update["resolved_sites"] <= 2 and update["assembled_modules"] == 1, update
        assert_update_equals_full_rebuild(root, store, update, tmp_path / "full")
