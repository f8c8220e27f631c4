"""analysis.findings and analysis.motifs on modules written from strings: guarded names are not
defects, demo blocks are kept apart, and the motifs mean what they say."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slotrelay.psmr.api import build_workspace, call
from tests.support.psmr_trees import write_tree

NOTEBOOK = """import sys


def is_jupyter():
    try:
        get_ipython
    except NameError:
        return False
    shell = get_ipython()
    return shell is not None


def install():
    try:
        ip = get_ipython()
        return ip
    except Exception:
        return sys.excepthook


def load():
    try:
        import IPython
    except ImportError:
        return None
    return IPython


def broken():
    try:
        return missing_helper()
    except ImportError:
        return None


def render():
    return 1


def render():
    return 2


if __name__ == "__main__":
    def render():
        return 3

    from sys import argv
    from sys import argv
    print(undefined_in_demo)
"""
COUNTER = """import contextlib
from contextlib import suppress


class Counter:
    def __init__(self):
        self.n = 0

    def bump(self):
        self.n = self.n + 1

    def augment(self):
        self.n += 1

    def reset_then_read(self):
        self.n = 0
        return self.n

    def drain(self, items):
        with suppress(StopIteration):
            next(items)
        with contextlib.suppress(KeyError):
            return items
        with contextlib.nullcontext():
            return None

    def save(self, path):
        with open(path, "w") as handle:
            handle.write(str(self.n))
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    root = write_tree(tmp_path_factory.mktemp("tree"), {"notebook.py": NOTEBOOK, "counter.py": COUNTER})
    store = root.parent / f"{root.name}-store"
    return build_workspace(root, store=store)["workspace_id"], store


def answer(tree: tuple[str, Path], operation: str, **request: Any) -> dict[str, Any]:
    ws, store = tree
    result = call(operation, {"workspace_id": ws, **request}, store=store)
    assert result["status"] == "ok", result.get("error")
    return result["data"]


def test_a_guarded_name_is_no_defect_and_demo_blocks_stand_apart(tree: tuple[str, Path]) -> None:
    found = answer(tree, "analysis.findings", scope="notebook")
    assert set(found["counts"]) == {"confirmed_defect", "anomaly", "hotspot"}
    # Real defects: a name an ImportError handler cannot catch, and one the demo block would hit.
    assert [(f["message"], f["span"]["line"]) for f in found["confirmed_defect"]] == [
        ("undefined name 'missing_helper'", 31),
        ("undefined name 'undefined_in_demo'", 50),
    ]
    # The module's own anomaly first, then the guarded names, then the demo block's, each labelled.
    anomalies = [
        (f.get("label"), f["rule"], f["span"]["line"], f.get("guarded_by")) for f in found["anomaly"]
    ]
    assert anomalies == [
        (None, "pyflakes:RedefinedWhileUnused", 40, None),
        ("guarded_name", "pyflakes:UndefinedName", 9, "probed by try/except NameError at line 7"),
        ("guarded_name", "pyflakes:UndefinedName", 15, "try/except Exception at line 17"),
        ("main_block", "pyflakes:RedefinedWhileUnused", 45, None),
        ("main_block", "pyflakes:RedefinedWhileUnused", 49, None),
        ("main_block", "pyflakes:UnusedImport", 49, None),
    ]
    assert found["labels"] == {"guarded_name": 2, "main_block": 3}
    assert {f["kind"] for f in found["anomaly"]} == {"anomaly"}


def test_motifs_mean_what_they_say(tree: tuple[str, Path]) -> None:
    motifs = answer(tree, "analysis.motifs", scope="counter")["motifs"]
    pairs = {(m["motif"], m["subject"].removeprefix("semantic:counter.Counter.")) for m in motifs}
    # Only `open` holds a resource; suppress and nullcontext hold none.
    assert {s for kind, s in pairs if kind == "resource_scope"} == {"save"}
    # bump and augment read n before writing it; reset_then_read writes first.
    assert {s for kind, s in pairs if kind == "read_modify_write"} == {"bump", "augment"}
