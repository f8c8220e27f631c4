"""Noise that hid the signal (issue 31): motifs of test code apart from production ones, re-exports that
are not unused imports, imports of the standard library and installed packages out of the headline
unknowns (listed on request), and no contract kind answered empty because it is not computed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slotrelay.psmr.api import build_workspace, call
from tests.support.psmr_trees import write_tree

FILES = {
    "pkg/__init__.py": (
        '"""The package."""\nimport os\nfrom json import dumps as dumps\n\n'
        "from .core import Thing, open_log\nfrom pkg.core import helper\n"
    ),
    "pkg/core.py": (
        "import json\nimport pytest\nimport not_a_module_anywhere\n\n\n"
        "class Thing:\n    pass\n\n\ndef helper():\n    return json.dumps({})\n\n\n"
        "def open_log(path):\n    with open(path) as handle:\n        return handle.read()\n"
    ),
    "tests/test_core.py": (
        "import pytest\n\nfrom pkg.core import helper\n\n\n"
        "def test_helper():\n    with pytest.raises(ZeroDivisionError):\n        helper() / 0\n"
    ),
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    root = write_tree(tmp_path_factory.mktemp("noise") / "proj", FILES)
    store = root.parent / "store"
    return build_workspace(root, store=store)["workspace_id"], store


def data(tree: tuple[str, Path], operation: str, **request: Any) -> dict[str, Any]:
    ws, store = tree
    answer = call(operation, {"workspace_id": ws, **request}, store=store)
    assert answer["status"] == "ok", answer.get("error")
    return dict(answer["data"])


def test_motifs_of_test_code_are_apart_and_listed_on_request(tree: tuple[str, Path]) -> None:
    production = data(tree, "analysis.motifs", motif="resource_scope")
    assert [m["subject"] for m in production["motifs"]] == ["semantic:pkg.core.open_log"]
    assert production["in_tests"] == 1 and "test_motifs" not in production
    both = data(tree, "analysis.motifs", motif="resource_scope", include_tests=True)
    assert [m["subject"] for m in both["test_motifs"]] == ["semantic:tests.test_core.test_helper"]
    assert [m["subject"] for m in both["motifs"]] == ["semantic:pkg.core.open_log"]


def test_reexports_in_a_package_init_are_not_unused_imports(tree: tuple[str, Path]) -> None:
    anomalies = data(tree, "analysis.findings", kind="anomaly")["anomaly"]
    unused = [(f["artifact"], f["message"]) for f in anomalies if f["rule"] == "pyflakes:UnusedImport"]
    # Outside an __init__.py, an unused import is still one.
    assert unused == [
        ("pkg/__init__.py", "'os' imported but unused"),
        ("pkg/core.py", "'pytest' imported but unused"),
        ("pkg/core.py", "'not_a_module_anywhere' imported but unused"),
    ]


def test_stdlib_and_installed_imports_are_not_counted_among_the_unknowns(tree: tuple[str, Path]) -> None:
    described = data(tree, "workspace.describe")
    # json (twice: core and the init), os (the init) are stdlib; pytest (twice) is installed.
    assert described["external_imports"] == {"stdlib": 3, "installed": 2}
    listed = data(tree, "query.unknowns")
    assert listed["external_imports_left_out"] == 5
    assert listed["total"] == described["unknown_count"]
    details = [u["detail"] for u in listed["unknowns"] if u["reason"] == "external_module"]
    assert details == ["not_a_module_anywhere is outside the analysed tree; its behaviour is not modelled"]
    every = data(tree, "query.unknowns", include_external_imports=True)
    assert every["total"] == listed["total"] + 5 and every["external_imports_left_out"] == 0
    asked = data(tree, "query.unknowns", reason="external_module")
    assert asked["total"] == 6


def test_contract_kinds_that_are_not_computed_are_left_out(tree: tuple[str, Path]) -> None:
    contracts = data(tree, "analysis.contracts", target="pkg.core.helper")
    assert "policy" not in contracts and "intent_constraint" not in contracts
    assert contracts["contracts"][0]["subject"] == "semantic:pkg.core.helper"
