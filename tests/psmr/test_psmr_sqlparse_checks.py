"""Issue 31's loop on a real package, sqlparse 0.6.1 (vendored, `tests/support/vendored_sqlparse.py`), with
its own tests run in the docker sandbox.

`TokenList.token_not_matching` has one production caller, `group_comments`, which calls it through an
untyped parameter (`tlist.token_not_matching(...)`): the resolver leaves it unresolved, as it left
`self._registry.get_or_retrieve(...)` in the issue. Renamed alone, every parse of SQL with a comment
would fail with AttributeError; validate does not validate it (needs_review, that call listed, apply
refused) until the delta edits it (`edit_reference`). Then it applies, the package's own tests pass in
the sandbox, and review reports them. A validated delta that breaks the package's tests fails its
review, the failed ids listed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slotrelay.psmr.api import Grants, build_workspace, call
from slotrelay.sandbox import SandboxUnavailable, get_backend
from tests.support.services import require_service
from tests.support.vendored_sqlparse import copy_sqlparse

pytestmark = pytest.mark.docker

RENAME = {
    "op": "rename_symbol",
    "target": "sqlparse.sql.TokenList.token_not_matching",
    "new_name": "token_skip",
}
CALLER = {"file": "sqlparse/engine/grouping.py", "line": 339, "column": 20}
# The package's own tests that parse SQL with comments (group_comments runs on every parse).
SUITE = ["tests/test_grouping.py", "tests/test_parse.py", "tests/test_utils.py"]


@pytest.fixture
def sqlparse_ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, str]:
    try:
        get_backend("docker", lang="python")
    except SandboxUnavailable as missing:
        require_service(False, f"the docker sandbox cannot run python here: {missing.message}")
    root = copy_sqlparse(tmp_path)
    store = tmp_path / "store"
    site = Path(pytest.__file__).resolve().parent.parent
    monkeypatch.setenv("SLOTRELAY_SANDBOX_ROOTS", f"{root}:{site}")
    return root, store, build_workspace(root, store=store)["workspace_id"]


def answer(operation: str, request: dict[str, Any], store: Path, **kwargs: Any) -> dict[str, Any]:
    return call(operation, request, store=store, **kwargs)


def ok(operation: str, request: dict[str, Any], store: Path, **kwargs: Any) -> dict[str, Any]:
    done = answer(operation, request, store, **kwargs)
    assert done["status"] == "ok", done.get("error")
    return dict(done["data"])


def propose(store: Path, ws: str, operations: list[dict[str, Any]]) -> dict[str, str]:
    delta = ok("delta.propose", {"workspace_id": ws, "intent": "issue 31", "operations": operations}, store)
    return {"workspace_id": ws, "delta_id": delta["delta_id"]}


def test_a_rename_is_not_validated_until_its_unresolved_production_caller_is_edited(
    sqlparse_ws: tuple[Path, Path, str],
) -> None:
    root, store, ws = sqlparse_ws
    delta = propose(store, ws, [RENAME])
    listed = ok("delta.validate", delta, store)
    assert listed["status"] == "needs_review" and all(c["ok"] for c in listed["checks"])
    [site] = listed["needs_review"]
    assert {k: site[k] for k in ("file", "line", "column", "reference", "scope", "likely_broken")} == {
        **CALLER,
        "reference": "call",
        "scope": "semantic:sqlparse.engine.grouping.group_comments",
        "likely_broken": True,
    }
    assert site["text"] == "eidx, end = tlist.token_not_matching("
    ok("projection.preview", delta, store)
    applied = answer("projection.apply", delta, store, grants=Grants.of(write_roots=[root]))
    assert applied["error"]["code"] == "VALIDATION_FAILED"
    assert "def token_not_matching" in (root / "sqlparse/sql.py").read_text()

    edit = {"op": "edit_reference", **CALLER, "name": "token_not_matching", "new_name": "token_skip"}
    delta = propose(store, ws, [RENAME, edit])
    assert ok("delta.validate", delta, store)["status"] == "validated"
    ok("projection.preview", delta, store)
    ok("projection.apply", delta, store, grants=Grants.of(write_roots=[root]))
    assert "eidx, end = tlist.token_skip(\n" in (root / "sqlparse/engine/grouping.py").read_text()

    ran = ok(
        "execution.run_tests",
        {**delta, "tests": SUITE, "timeout_s": 600},
        store,
        grants=Grants.of(process_execution=True),
    )
    assert ran["passed"] and ran["failed"] == [], ran["failed"]
    assert ran["counts"]["passed"] > 150 and ran["backend"] == "docker"
    ok("verification.rebuild", delta, store)
    review = ok("verification.review", delta, store)
    assert review["passed"] and review["failed_tests"] == []
    assert review["tests"]["counts"] == ran["counts"] and review["tests"]["tests"] == SUITE


def test_a_validated_delta_that_breaks_the_package_fails_its_review(
    sqlparse_ws: tuple[Path, Path, str],
) -> None:
    root, store, ws = sqlparse_ws
    # Quotes are no longer removed: legal, and every check passes; sqlparse's own tests disagree.
    body = {"op": "replace_body", "target": "sqlparse.utils.remove_quotes", "body": "return val\n"}
    delta = propose(store, ws, [body])
    assert ok("delta.validate", delta, store)["status"] == "validated"
    ok("projection.preview", delta, store)
    ok("projection.apply", delta, store, grants=Grants.of(write_roots=[root]))
    ran = ok(
        "execution.run_tests",
        {**delta, "tests": SUITE, "timeout_s": 600},
        store,
        grants=Grants.of(process_execution=True),
    )
    assert not ran["passed"]
    assert 'tests/test_utils.py::test_remove_quotes["foo"-foo]' in ran["failed"]
    ok("verification.rebuild", delta, store)
    assert ok("verification.roundtrip", delta, store)["all_matched"]  # the graph says what was meant...
    review = ok("verification.review", delta, store)  # ...and the tests say it is wrong
    assert review["passed"] is False
    assert review["failed_tests"] == ran["failed"] and len(review["failed_tests"]) == ran["failed_total"]
