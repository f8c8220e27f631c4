"""delta.validate cannot pass on a rename that leaves code naming the old name (issue 31's
`self._registry.get_or_retrieve(...)` left unedited in `Resolver.lookup`): every reference by name
anywhere in the tree is found, an agent edits the ones the graph cannot resolve by position
(`edit_reference`) or has the rename take them (`include_unresolved`), and a delta's constraints are
checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from slotrelay.psmr.api import Grants, build_workspace, call
from tests.support.psmr_trees import write_tree

REGISTRY = '''"""Where values are kept."""


class Registry:
    def __init__(self):
        self.items = {}

    def get_or_retrieve(self, key):
        """Called as get_or_retrieve by the resolver."""
        return self.items.setdefault(key, key.upper())
'''
RESOLVER = """class Resolver:
    def __init__(self, registry):
        self._registry = registry

    def lookup(self, key):
        return self._registry.get_or_retrieve(key)
"""
TESTS = """from pkg.registry import Registry


def test_get():
    assert Registry().get_or_retrieve("a") == "A"
"""
TARGET = "pkg.registry.Registry.get_or_retrieve"
RENAME = {"op": "rename_symbol", "target": TARGET, "new_name": "fetch"}
# Where Resolver.lookup calls it: the line, and the byte column where the call starts.
SITE = {"file": "pkg/resolver.py", "line": 6, "column": 15}


def workspace(tmp_path: Path, **extra: str) -> tuple[Path, Path, str]:
    files = {
        "pkg/__init__.py": "",
        "pkg/registry.py": REGISTRY,
        "pkg/resolver.py": RESOLVER,
        "tests/test_registry.py": TESTS,
        **{name.replace("__", "/") + ".py": text for name, text in extra.items()},
    }
    root = write_tree(tmp_path / "proj", files)
    store = tmp_path / "store"
    return root, store, build_workspace(root, store=store)["workspace_id"]


def answer(operation: str, request: dict[str, Any], store: Path, **kwargs: Any) -> dict[str, Any]:
    return call(operation, request, store=store, **kwargs)


def propose(store: Path, ws: str, operations: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    proposed = answer(
        "delta.propose", {"workspace_id": ws, "intent": "t", "operations": operations, **extra}, store
    )
    assert proposed["status"] == "ok", proposed["error"]
    return dict(proposed["data"])


def checks_of(validated: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["check"]: c for c in validated["data"]["checks"]}


def lookup(root: Path) -> str:
    program = (
        "from pkg.registry import Registry; from pkg.resolver import Resolver; "
        "print(Resolver(Registry()).lookup('a'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=root, capture_output=True, text=True, check=False
    )
    return done.stdout.strip() or done.stderr.strip().splitlines()[-1]


def test_a_rename_leaving_an_unresolved_caller_is_not_validated_until_that_call_is_edited(
    tmp_path: Path,
) -> None:
    root, store, ws = workspace(tmp_path)
    delta = propose(store, ws, [RENAME])
    [flagged] = delta["possibly_affected"]
    assert (flagged["artifact"], flagged["span"]["line"], flagged["span"]["col"]) == tuple(SITE.values())
    request = {"workspace_id": ws, "delta_id": delta["delta_id"]}
    listed = answer("delta.validate", request, store)["data"]
    assert listed["status"] == "needs_review" and listed["needs_review_count"] == 1
    invariants = {c["check"]: c for c in listed["checks"]}["graph_invariants"]
    [site] = invariants["needs_review"]
    assert {k: site[k] for k in ("file", "line", "column", "text", "reference", "likely_broken")} == {
        **SITE,
        "text": "return self._registry.get_or_retrieve(key)",
        "reference": "call",
        "likely_broken": True,
    }
    assert site["scope"] == "semantic:pkg.resolver.Resolver.lookup"
    assert "nothing else defines it" in site["reason"]
    assert listed["needs_review"] == [site]
    # The docstring naming it is a hint, not a site to review.
    [string] = invariants["string_references"]
    assert (string["file"], string["line"]) == ("pkg/registry.py", 9)
    answer("projection.preview", request, store)
    applied = answer("projection.apply", request, store, grants=Grants.of(write_roots=[root]))
    assert applied["error"]["code"] == "VALIDATION_FAILED" and "needs_review" in applied["error"]["message"]
    assert "get_or_retrieve" in (root / "pkg/registry.py").read_text()

    edit = {"op": "edit_reference", **SITE, "name": "get_or_retrieve", "new_name": "fetch"}
    delta = propose(store, ws, [RENAME, edit])
    assert [e["status"] for e in delta["edits"] if e["kind"] == "reference"] == ["edited"]
    request = {"workspace_id": ws, "delta_id": delta["delta_id"]}
    validated = answer("delta.validate", request, store)
    assert validated["status"] == "ok" and validated["data"]["status"] == "validated", validated
    assert any("docstring" in w for w in validated["warnings"])
    assert answer("projection.preview", request, store)["status"] == "ok"
    assert answer("projection.apply", request, store, grants=Grants.of(write_roots=[root]))["status"] == "ok"
    assert "        return self._registry.fetch(key)\n" in (root / "pkg/resolver.py").read_text()
    assert lookup(root) == "A"


def test_an_import_left_naming_a_renamed_function_fails(tmp_path: Path) -> None:
    """Re-exported by a star import, imported by name elsewhere: the rename does not reach that import,
    and validate fails on it (it would be an ImportError)."""
    files = {
        "pkg/__init__.py": "from .helpers import *\n",
        "pkg/helpers.py": "def legacy():\n    return 1\n",
        "pkg/app.py": "from pkg import legacy\n\n\ndef run():\n    return legacy()\n",
    }
    root = write_tree(tmp_path / "proj", files)
    store = tmp_path / "store"
    ws = build_workspace(root, store=store)["workspace_id"]
    delta = propose(
        store, ws, [{"op": "rename_symbol", "target": "pkg.helpers.legacy", "new_name": "modern"}]
    )
    refused = answer("delta.validate", {"workspace_id": ws, "delta_id": delta["delta_id"]}, store)
    assert "graph_invariants" in refused["data"]["failed"]
    imports = [
        p for p in checks_of(refused)["graph_invariants"]["problems"] if p.get("reference") == "import"
    ]
    assert [(p["file"], p["line"], p["column"], p["text"]) for p in imports] == [
        ("pkg/app.py", 1, 0, "from pkg import legacy")
    ]
    assert "ImportError" in imports[0]["problem"]


def test_the_rename_itself_may_take_the_unresolved_calls_each_listed(tmp_path: Path) -> None:
    root, store, ws = workspace(tmp_path)
    delta = propose(store, ws, [{**RENAME, "include_unresolved": True}])
    [edit] = [e for e in delta["edits"] if e["kind"] == "reference"]
    assert edit["status"] == "renamed_unresolved" and "may call something else" in edit["reason"]
    assert (edit["file"], edit["line"], edit["column"]) == tuple(SITE.values())
    request = {"workspace_id": ws, "delta_id": delta["delta_id"]}
    assert answer("delta.validate", request, store)["data"]["status"] == "validated"
    answer("projection.preview", request, store)
    assert answer("projection.apply", request, store, grants=Grants.of(write_roots=[root]))["status"] == "ok"
    assert lookup(root) == "A"


def test_attribute_reads_are_references_too(tmp_path: Path) -> None:
    users = (
        "from pkg.registry import Registry\n\n\n"
        "def handler(registry):\n    method = registry.get_or_retrieve\n    return method\n\n\n"
        "def named(registry):\n    return getattr(registry, 'get_or_retrieve')\n"
    )
    _, store, ws = workspace(tmp_path, pkg__users=users)
    delta = propose(store, ws, [RENAME])
    listed = answer("delta.validate", {"workspace_id": ws, "delta_id": delta["delta_id"]}, store)
    invariants = checks_of(listed)["graph_invariants"]
    assert {
        (p["file"], p["line"], p["reference"], p["likely_broken"]) for p in invariants["needs_review"]
    } == {
        ("pkg/resolver.py", 6, "call", True),
        ("pkg/users.py", 5, "attribute", True),
    }
    assert {(s["file"], s["line"]) for s in invariants["string_references"]} == {
        ("pkg/registry.py", 9),
        ("pkg/users.py", 10),
    }
    # An attribute read is edited by position like a call: here, written another way.
    attribute = {"op": "edit_reference", "file": "pkg/users.py", "line": 5, "column": 13,
                 "name": "get_or_retrieve", "expression": "registry.fetch"}  # fmt: skip
    call_site = {"op": "edit_reference", **SITE, "name": "get_or_retrieve", "new_name": "fetch"}
    delta = propose(store, ws, [RENAME, attribute, call_site])
    validated = answer("delta.validate", {"workspace_id": ws, "delta_id": delta["delta_id"]}, store)
    assert validated["data"]["status"] == "validated", checks_of(validated)["graph_invariants"]


def test_a_name_something_else_defines_needs_review_and_can_be_accepted(tmp_path: Path) -> None:
    cache = "class Cache:\n    def get_or_retrieve(self, key):\n        return key\n"
    root, store, ws = workspace(tmp_path, pkg__cache=cache)
    delta = propose(store, ws, [RENAME])
    request = {"workspace_id": ws, "delta_id": delta["delta_id"]}
    validated = answer("delta.validate", request, store)
    assert validated["status"] == "ok" and validated["data"]["status"] == "needs_review"
    assert all(c["ok"] for c in validated["data"]["checks"])
    [site] = validated["data"]["needs_review"]
    assert (site["file"], site["line"], site["column"]) == tuple(SITE.values())
    assert not site["likely_broken"] and "something else of that name still exists" in site["reason"]
    answer("projection.preview", request, store)
    refused = answer("projection.apply", request, store, grants=Grants.of(write_roots=[root]))
    assert refused["error"]["code"] == "VALIDATION_FAILED" and "needs_review" in refused["error"]["message"]
    accepted = answer("delta.validate", {**request, "accept_review": True}, store)
    assert accepted["data"]["status"] == "validated" and accepted["data"]["accepted_review"]
    answer("projection.preview", request, store)
    assert answer("projection.apply", request, store, grants=Grants.of(write_roots=[root]))["status"] == "ok"


@pytest.mark.parametrize("accepted_before", [False, True])
def test_apply_refuses_a_site_to_review_that_validate_did_not_see(
    tmp_path: Path, accepted_before: bool
) -> None:
    """apply runs the checks again on the files as they are now: a call naming the old name written in
    another file after validate (accepted sites or none) leaves a site nobody accepted, so nothing is
    written until validate runs again."""
    cache = "class Cache:\n    def get_or_retrieve(self, key):\n        return key\n"
    extra = {"pkg__cache": cache} if accepted_before else {}
    root, store, ws = workspace(tmp_path, pkg__other="def use(x):\n    return x\n", **extra)
    # With a Cache carrying the name, Resolver.lookup's call is a site to review, accepted; without,
    # it is edited and nothing is left to review.
    edit = {"op": "edit_reference", **SITE, "name": "get_or_retrieve", "new_name": "fetch"}
    delta = propose(store, ws, [RENAME] if accepted_before else [RENAME, edit])
    request = {"workspace_id": ws, "delta_id": delta["delta_id"]}
    validated = answer("delta.validate", {**request, "accept_review": accepted_before}, store)["data"]
    assert validated["status"] == "validated" and validated["needs_review_count"] == int(accepted_before)
    answer("projection.preview", request, store)
    (root / "pkg/other.py").write_text("def use(x):\n    return x.get_or_retrieve(1)\n")

    refused = answer("projection.apply", request, store, grants=Grants.of(write_roots=[root]))
    assert refused["error"]["code"] == "VALIDATION_FAILED", refused
    assert "delta.validate did not accept" in refused["error"]["message"]
    [site] = refused["data"]["needs_review"]
    assert (site["file"], site["line"], site["text"]) == ("pkg/other.py", 2, "return x.get_or_retrieve(1)")
    assert "get_or_retrieve" in (root / "pkg/registry.py").read_text()

    # Validated again, the new site is listed; accepted, the apply writes.
    again = answer("delta.validate", request, store)["data"]
    assert again["status"] == "needs_review" and again["needs_review_count"] == 1 + int(accepted_before)
    answer("delta.validate", {**request, "accept_review": True}, store)
    applied = answer("projection.apply", request, store, grants=Grants.of(write_roots=[root]))
    assert applied["status"] == "ok", applied
    described = answer("delta.describe", request, store)["data"]
    assert described["status"] == "applied"
    assert described["validation"]["accepted_review"]
    assert described["validation"]["needs_review_count"] == 1 + int(accepted_before)
    assert "strings" not in described["validation"]


@pytest.mark.parametrize(
    ("constraint", "broken"),
    [
        (f"signature_unchanged: {TARGET}", f"{TARGET} is renamed"),
        ("unchanged: pkg/resolver.py", "pkg/resolver.py changes"),
        ("public_api_unchanged", f"{TARGET} is renamed"),
    ],
)
def test_constraints_are_checked_by_validate(tmp_path: Path, constraint: str, broken: str) -> None:
    _, store, ws = workspace(tmp_path)
    edit = {"op": "edit_reference", **SITE, "name": "get_or_retrieve", "new_name": "fetch"}
    delta = propose(store, ws, [RENAME, edit], constraints=[constraint])
    refused = answer("delta.validate", {"workspace_id": ws, "delta_id": delta["delta_id"]}, store)
    assert refused["data"]["failed"] == ["constraints"]
    assert checks_of(refused)["constraints"]["problems"] == [{"constraint": constraint, "problem": broken}]


def test_a_constraint_nobody_can_check_is_refused(tmp_path: Path) -> None:
    _, store, ws = workspace(tmp_path)
    vague = answer(
        "delta.propose",
        {"workspace_id": ws, "intent": "t", "operations": [RENAME], "constraints": ["keep it fast"]},
        store,
    )
    assert vague["error"]["code"] == "INVALID_QUERY" and "constraints.0" in vague["error"]["message"]
    missing = answer(
        "delta.propose",
        {
            "workspace_id": ws,
            "intent": "t",
            "operations": [RENAME],
            "constraints": ["unchanged: pkg.nowhere"],
        },
        store,
    )
    assert missing["error"]["code"] == "OBJECT_NOT_FOUND" and "constraints[0]" in missing["error"]["message"]
