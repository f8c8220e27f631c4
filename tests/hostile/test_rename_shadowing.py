"""A rename to a name its scope already binds is refused by delta.validate, naming what it shadows
(issue 29 item 7: `b` renamed to `len` rewrote `from pkg.core import a, len, c`, and `size([1, 2])`
then returned `[1, 2, 1, 2]`; validation passed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from slotrelay.psmr.api import Grants, build_workspace, call
from tests.support.psmr_trees import write_tree

FILES = {
    "pkg/__init__.py": "",
    "pkg/core.py": "def a(x):\n    return x\n\n\ndef b(x):\n    return x * 2\n\n\ndef c(x):\n    return x\n",
    "pkg/other.py": (
        "from pkg.core import a, b, c\n\nLIMIT = 3\n\n\ndef size(xs):\n    return len(xs)\n\n\n"
        "def twice(xs):\n    return a(b(c(xs)))\n"
    ),
    "pkg/shapes.py": (
        "class Shape:\n    def area(self):\n        return 0\n\n"
        "    def name(self):\n        return 'shape'\n\n\n"
        "class Square(Shape):\n    def side(self):\n        return 1\n\n"
        "    def area(self):\n        return self.side() ** 2\n"
    ),
}


def workspace(tmp_path: Path) -> tuple[Path, Path, str]:
    root = write_tree(tmp_path / "proj", FILES)
    store = tmp_path / "store"
    return root, store, build_workspace(root, store=store)["workspace_id"]


def validate_rename(store: Path, ws: str, target: str, new_name: str) -> dict[str, Any]:
    operations = [{"op": "rename_symbol", "target": target, "new_name": new_name}]
    proposed = call(
        "delta.propose", {"workspace_id": ws, "intent": "t", "operations": operations}, store=store
    )
    assert proposed["status"] == "ok", proposed["error"]
    return call("delta.validate", {"workspace_id": ws, "delta_id": proposed["data"]["delta_id"]}, store=store)


def shadowed(validated: dict[str, Any]) -> list[str]:
    assert validated["status"] == "error" and validated["error"]["code"] == "VALIDATION_FAILED", validated
    checks = {c["check"]: c for c in validated["data"]["checks"]}
    return [p["shadowed"] for p in checks["graph_invariants"]["problems"] if "shadowed" in p]


def test_a_rename_to_a_builtin_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    root, store, ws = workspace(tmp_path)
    refused = validate_rename(store, ws, "pkg.core.b", "len")
    assert shadowed(refused) == ["the builtin len"]
    problem = next(
        p for c in refused["data"]["checks"] for p in c["problems"] if p.get("shadowed") == "the builtin len"
    )
    assert "renaming pkg.core.b to len shadows the builtin len" in problem["problem"]
    applied = call(
        "projection.apply",
        {"workspace_id": ws, "delta_id": refused["data"]["delta_id"]},
        store=store,
        grants=Grants.of(write_roots=[root]),
    )
    assert applied["error"]["code"] == "VALIDATION_FAILED"
    program = "from pkg.other import size; print(size([1, 2]))"
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=root, capture_output=True, text=True, check=True
    )
    assert done.stdout == "2\n"


def test_a_rename_to_a_name_an_importing_module_binds_is_refused(tmp_path: Path) -> None:
    _, store, ws = workspace(tmp_path)
    assert shadowed(validate_rename(store, ws, "pkg.core.b", "LIMIT")) == ["pkg.other.LIMIT (line 3)"]
    # A name its own module defines is refused earlier, by delta.propose.
    operations = [{"op": "rename_symbol", "target": "pkg.core.b", "new_name": "a"}]
    proposed = call(
        "delta.propose", {"workspace_id": ws, "intent": "t", "operations": operations}, store=store
    )
    assert (
        proposed["error"]["code"] == "INVALID_QUERY"
        and "pkg.core.a already exists" in proposed["error"]["message"]
    )


def test_a_method_renamed_to_a_name_of_its_class_hierarchy_is_refused(tmp_path: Path) -> None:
    _, store, ws = workspace(tmp_path)
    # Square.side as `name` would override Shape.name; Shape.area as `side` would be overridden.
    assert shadowed(validate_rename(store, ws, "pkg.shapes.Square.side", "name")) == ["pkg.shapes.Shape.name"]
    assert shadowed(validate_rename(store, ws, "pkg.shapes.Shape.name", "side")) == ["pkg.shapes.Square.side"]


def test_a_rename_to_a_free_name_still_validates(tmp_path: Path) -> None:
    _, store, ws = workspace(tmp_path)
    validated = validate_rename(store, ws, "pkg.core.b", "double")
    assert validated["status"] == "ok" and validated["data"]["status"] == "validated", validated
