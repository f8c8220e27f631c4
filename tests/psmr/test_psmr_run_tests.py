"""execution.run_tests answers an agent can act on, and review reads them (issue 31): failures first
with their ids and the count of each outcome, pages in that order, every runtime evidence id it or
impact hands out resolves in query.evidence, and a validated delta that breaks the tests fails its
review with the failed ids listed. The tests run in the docker sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slotrelay.psmr.api import Grants, build_workspace, call
from slotrelay.sandbox import SandboxUnavailable, get_backend
from tests.support.psmr_trees import write_tree
from tests.support.services import require_service

pytestmark = pytest.mark.docker

FILES = {
    "kit/__init__.py": "",
    "kit/calc.py": "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n",
    "tests/__init__.py": "",
    "tests/test_calc.py": (
        "import pytest\n\nfrom kit.calc import add, sub\n\n\n"
        "def test_a_add():\n    assert add(1, 2) == 3\n\n\n"
        "def test_b_sub():\n    assert sub(3, 2) == 1\n\n\n"
        "@pytest.mark.skip(reason='later')\ndef test_c_later():\n    pass\n\n\n"
        "def test_d_sum():\n    assert add(2, 2) == 5\n"
    ),
}
SUITE = ["tests/test_calc.py"]
EXECUTE = Grants.of(process_execution=True)


@pytest.fixture
def kit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, str]:
    try:
        get_backend("docker", lang="python")
    except SandboxUnavailable as missing:
        require_service(False, f"the docker sandbox cannot run python here: {missing.message}")
    root = write_tree(tmp_path / "proj", FILES)
    store = tmp_path / "store"
    site = Path(pytest.__file__).resolve().parent.parent
    monkeypatch.setenv("SLOTRELAY_SANDBOX_ROOTS", f"{root}:{site}")
    return root, store, build_workspace(root, store=store)["workspace_id"]


def ok(operation: str, request: dict[str, Any], store: Path, **kwargs: Any) -> dict[str, Any]:
    answer = call(operation, request, store=store, **kwargs)
    assert answer["status"] == "ok", answer.get("error")
    return answer


def test_failures_come_first_and_every_runtime_evidence_id_resolves(kit: tuple[Path, Path, str]) -> None:
    _, store, ws = kit
    request = {"workspace_id": ws, "tests": SUITE}
    ran = ok("execution.run_tests", request, store, grants=EXECUTE)["data"]
    assert not ran["passed"] and ran["failed"] == ["tests/test_calc.py::test_d_sum"]
    assert ran["counts"] == {"passed": 2, "failed": 1, "skipped": 1} and ran["failed_total"] == 1
    assert [(r["test"].rsplit("::", 1)[-1], r["status"]) for r in ran["results"]] == [
        ("test_d_sum", "failed"),
        ("test_c_later", "skipped"),
        ("test_a_add", "passed"),
        ("test_b_sub", "passed"),
    ]
    assert "assert 4 == 5" in ran["results"][0]["message"]
    # Paged, the order holds: the failure is on the first page.
    first = ok("execution.run_tests", {**request, "budget": {"max_nodes": 1}}, store, grants=EXECUTE)
    assert [r["status"] for r in first["data"]["results"]] == ["failed"]
    assert first["continuation"]["truncated"]

    ids = [r["id"] for r in ran["results"]]
    evidence = ok("query.evidence", {"workspace_id": ws, "evidence_ids": ids}, store)["data"]["evidence"]
    assert [(e["id"], e["authority"]) for e in evidence] == [(i, "runtime:pytest") for i in ids]
    impact = ok("analysis.impact", {"workspace_id": ws, "target": "kit.calc.add"}, store)
    observed = impact["data"]["runtime_certainty"]["observed"]
    assert {o["test"].rsplit("::", 1)[-1] for o in observed} == {"test_a_add", "test_d_sum"}
    refs = [o["evidence_ref"] for o in observed]
    resolved = ok("query.evidence", {"workspace_id": ws, "evidence_ids": refs}, store)["data"]["evidence"]
    assert [e["id"] for e in resolved] == refs


def _apply(root: Path, store: Path, ws: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
    delta = ok("delta.propose", {"workspace_id": ws, "intent": "t", "operations": operations}, store)["data"]
    request = {"workspace_id": ws, "delta_id": delta["delta_id"]}
    assert ok("delta.validate", request, store)["data"]["status"] == "validated"
    ok("projection.preview", request, store)
    ok("projection.apply", request, store, grants=Grants.of(write_roots=[root]))
    return request


def test_a_validated_delta_that_breaks_the_tests_fails_its_review(kit: tuple[Path, Path, str]) -> None:
    root, store, ws = kit
    body = [{"op": "replace_body", "target": "kit.calc.sub", "body": "return b - a\n"}]
    request = _apply(root, store, ws, body)
    tests = {**request, "tests": ["tests/test_calc.py::test_a_add", "tests/test_calc.py::test_b_sub"]}
    ran = ok("execution.run_tests", tests, store, grants=EXECUTE)["data"]
    assert ran["failed"] == ["tests/test_calc.py::test_b_sub"]
    ok("verification.rebuild", request, store)
    assert ok("verification.roundtrip", request, store)["data"]["all_matched"]
    review = ok("verification.review", request, store)["data"]
    assert review["passed"] is False
    assert review["failed_tests"] == ["tests/test_calc.py::test_b_sub"]
    assert review["tests"]["counts"] == {"passed": 1, "failed": 1, "skipped": 0}
    described = ok("delta.describe", request, store)["data"]
    assert described["status"] == "review_failed"


def test_a_review_reports_the_tests_that_passed_and_says_when_none_ran(kit: tuple[Path, Path, str]) -> None:
    root, store, ws = kit
    body = [{"op": "replace_body", "target": "kit.calc.add", "body": "return b + a\n"}]
    request = _apply(root, store, ws, body)
    ok("verification.rebuild", request, store)
    untested = ok("verification.review", request, store)
    assert untested["data"]["tests"] is None
    assert any("no execution.run_tests" in w for w in untested["warnings"])
    tests = {**request, "tests": ["tests/test_calc.py::test_a_add"]}
    assert ok("execution.run_tests", tests, store, grants=EXECUTE)["data"]["passed"]
    review = ok("verification.review", request, store)["data"]
    assert review["passed"] and review["failed_tests"] == []
    assert review["tests"]["counts"] == {"passed": 1, "failed": 0, "skipped": 0}
