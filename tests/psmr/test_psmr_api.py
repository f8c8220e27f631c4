"""The API over a workspace built from strings: every operator, every budget with its continuation,
every error code."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from slotrelay.psmr.api import OPERATIONS, build_workspace, call, list_workspaces
from slotrelay.psmr.envelope import render
from slotrelay.psmr.errors import ERROR_CODES
from tests.support.psmr_trees import write_tree

ENVELOPE_KEYS = {
    "schema",
    "request_id",
    "status",
    "data",
    "evidence_refs",
    "unknown_refs",
    "conflict_refs",
    "warnings",
    "continuation",
}
SEED_OPERATIONS = {
    "workspace.describe",
    "operator.list",
    "operator.describe",
    "query.search",
    "query.subgraph",
    "query.evidence",
    "query.unknowns",
    "query.conflicts",
    "analysis.impact",
    "analysis.semantic_diff",
    "analysis.findings",
    "analysis.motifs",
    "analysis.contracts",
}
# The change half's reads: the recorded deltas, as stored.
DELTA_READS = {"delta.list", "delta.describe"}
CHANGE_OPERATIONS = {
    *DELTA_READS,
    "delta.propose",
    "delta.validate",
    "projection.preview",
    "projection.apply",
    "execution.run_tests",
    "verification.rebuild",
    "verification.roundtrip",
    "verification.review",
}


def ok(operation: str, request: dict[str, Any], store: Path) -> dict[str, Any]:
    result = call(operation, request, store=store)
    assert set(result) == ENVELOPE_KEYS, result.get("error")
    assert result["schema"] == "psmr-tool-result-0.1" and result["status"] == "ok"
    json.dumps(result)
    return result


def test_the_operator_catalog_is_the_seed_surface_with_valid_schemas() -> None:
    assert set(OPERATIONS) == SEED_OPERATIONS | CHANGE_OPERATIONS
    for name, op in OPERATIONS.items():
        jsonschema.Draft202012Validator.check_schema(op["input_schema"])
        jsonschema.validate(op["example"], op["input_schema"])
        assert op["description"], name
        assert (op["side_effects"] == "none (read-only)") is (name in SEED_OPERATIONS | DELTA_READS), name
    assert OPERATIONS["projection.apply"]["required_capabilities"] == ["source-write"]
    assert OPERATIONS["execution.run_tests"]["required_capabilities"] == ["process-execution"]


def test_discovery_and_queries(shop: tuple[str, Path]) -> None:
    ws, store = shop
    described = ok("workspace.describe", {"workspace_id": ws}, store)["data"]
    assert described["unknown_count"] > 0 and described["conflict_count"] >= 2
    assert described["available_operators"] == sorted(SEED_OPERATIONS | CHANGE_OPERATIONS)
    assert ws in [w["workspace_id"] for w in list_workspaces(store=store)]
    listed = ok("operator.list", {"filter": {"input_type": "evidence"}}, store)["data"]["operators"]
    assert [o["operator"] for o in listed] == ["query.evidence"]
    assert ok("operator.describe", {"operator": "analysis.impact"}, store)["data"]["input_schema"][
        "required"
    ] == ["workspace_id", "target"]

    found = ok("query.search", {"workspace_id": ws, "text": "add"}, store)["data"]["matches"]
    assert found[0]["id"] == "semantic:shop.cart.Cart.add"
    assert [
        m["id"]
        for m in ok("query.search", {"workspace_id": ws, "text": "count", "kind": "state"}, store)["data"][
            "matches"
        ]
    ] == ["semantic:shop.cart.COUNT"]
    effects = ok("query.search", {"workspace_id": ws, "text": "", "kind": "effect"}, store)["data"]["matches"]
    assert {(e["id"], e["effect"]) for e in effects} >= {
        ("semantic:subprocess.run", "subprocess"),
        ("semantic:<builtin>.open", "file"),
    }
    boundary = ok("query.search", {"workspace_id": ws, "text": "", "kind": "boundary"}, store)["data"][
        "matches"
    ]
    assert [b["id"] for b in boundary] == ["semantic:shop.cart.Cart.checkout"]

    sliced = ok(
        "query.subgraph",
        {
            "workspace_id": ws,
            "anchor": {"kind": "symbol", "value": "shop.cart.Cart.add"},
            "depth": 1,
            "include_evidence": True,
        },
        store,
    )
    data = sliced["data"]
    edges = {(e["source"], e["relation"], e["target"]) for e in data["edges"]}
    assert ("semantic:shop.cart.Cart.add", "calls", "semantic:shop.pricing.price") in edges
    assert ("semantic:tests.test_cart.test_add", "calls", "semantic:shop.cart.Cart.add") in edges
    assert ("semantic:shop.cart.Cart.add", "writes_state", "semantic:shop.cart.COUNT") in edges
    assert ("semantic:shop.cart.Cart.add", "reads_state", "semantic:shop.cart.Cart.total") in edges
    assert {"nodes", "edges", "contracts", "unknowns", "conflicts", "evidence", "provenance"} <= set(data)
    assert sliced["evidence_refs"] == sorted({ev for e in data["edges"] for ev in e["evidence_refs"]})
    record = ok("query.evidence", {"workspace_id": ws, "evidence_ids": sliced["evidence_refs"][:1]}, store)[
        "data"
    ]["evidence"][0]
    assert {"artifact", "span", "resolution", "authority", "status", "revision"} <= set(record)

    unknowns = ok("query.unknowns", {"workspace_id": ws, "scope": "shop.cart.Cart.handler"}, store)["data"]
    assert unknowns["by_reason"] == {"parameter_call": 1}
    syntax = ok("query.unknowns", {"workspace_id": ws, "reason": "syntax_error"}, store)["data"]["unknowns"]
    assert [u["artifact"] for u in syntax] == ["bad.py"]
    kinds = {c["kind"] for c in ok("query.conflicts", {"workspace_id": ws}, store)["data"]["conflicts"]}
    assert kinds == {"duplicate_definition", "import_shadows_definition"}


def test_analyses(shop: tuple[str, Path]) -> None:
    ws, store = shop
    impact = ok(
        "analysis.impact", {"workspace_id": ws, "target": "semantic:shop.pricing.price", "depth": 3}, store
    )["data"]
    assert [d["id"] for d in impact["direct"]] == ["semantic:shop.cart.Cart.add"]
    assert "semantic:tests.test_cart.test_add" in [d["id"] for d in impact["derived"]]
    assert [t["id"] for t in impact["likely_tests"]] == ["semantic:tests.test_cart.test_add"]
    assert impact["runtime_certainty"]["observed"] == []
    assert set(impact["review_files"]) == {"shop/pricing.py", "shop/cart.py", "tests/test_cart.py"}

    found = ok("analysis.findings", {"workspace_id": ws}, store)["data"]
    assert set(found["counts"]) == {"confirmed_defect", "anomaly", "hotspot"}
    assert any(
        f["rule"] == "pyflakes:SyntaxError" and f["artifact"] == "bad.py" for f in found["confirmed_defect"]
    )
    assert any(f["rule"] == "pyflakes:RedefinedWhileUnused" for f in found["anomaly"])

    motifs = {
        (m["motif"], m["subject"])
        for m in ok("analysis.motifs", {"workspace_id": ws}, store)["data"]["motifs"]
    }
    assert ("resource_scope", "semantic:shop.cart.Cart.checkout") in motifs
    assert ("boundary_adapter", "semantic:shop.cart.Cart.checkout") in motifs
    assert ("read_modify_write", "semantic:shop.cart.Cart.add") in motifs

    contracts = ok("analysis.contracts", {"workspace_id": ws, "target": "shop.pricing.price"}, store)["data"]
    item = contracts["contracts"][0]
    assert item["preconditions"][0]["expr"] == "item is not None" and item["docstring"] == "Price of an item."
    assert [t["id"] for t in contracts["test_contract"]] == ["semantic:tests.test_cart.test_add"]
    raises = ok("analysis.contracts", {"workspace_id": ws, "target": "shop.cart.Cart.checkout"}, store)[
        "data"
    ]
    assert raises["contracts"][0]["raises"] == ["ValueError"]


def pages(operation: str, request: dict[str, Any], store: Path) -> tuple[dict[str, list[Any]], int]:
    """Follow continuation tokens to the end; the concatenated sections and the number of pages."""
    merged: dict[str, list[Any]] = {}
    count = 0
    token = None
    while True:
        body = {**request, **({"continuation_token": token} if token else {})}
        result = ok(operation, body, store)
        count += 1
        for name, value in result["data"].items():
            if isinstance(value, list) and name != "relations":
                merged.setdefault(name, []).extend(value)
        budget = request["budget"]
        assert len(result["data"].get("nodes", [])) <= budget.get("max_nodes", 500)
        assert len(result["data"].get("edges", [])) <= budget.get("max_edges", 1500)
        assert len(result["data"].get("evidence", [])) <= budget.get("max_evidence_items", 100)
        assert result["data"]["truncated"] is (result["continuation"] is not None)
        assert len(render(result).encode()) <= budget.get("max_text_bytes", 100_000)
        assert not result["warnings"]
        if result["continuation"] is None:
            return merged, count
        assert result["continuation"]["truncated"] is True
        token = result["continuation"]["continuation_token"]


@pytest.mark.parametrize(
    ("operation", "request_body", "budget"),
    [
        (
            "query.subgraph",
            {
                "anchor": {"kind": "symbol", "value": "shop.cart.Cart"},
                "depth": 3,
                "relations": ["defines", "calls", "called_by", "reads_state", "writes_state"],
                "include_evidence": True,
            },
            {"max_nodes": 2},
        ),
        (
            "query.subgraph",
            {
                "anchor": {"kind": "file", "value": "shop/cart.py"},
                "depth": 2,
                "relations": ["defines", "calls"],
                "include_evidence": True,
            },
            {"max_edges": 2},
        ),
        (
            "query.subgraph",
            {
                "anchor": {"kind": "symbol", "value": "shop.cart"},
                "depth": 2,
                "relations": ["defines", "calls"],
                "include_evidence": True,
            },
            {"max_evidence_items": 1},
        ),
        ("query.search", {"text": "", "kind": "symbol"}, {"max_text_bytes": 1200}),
        ("query.unknowns", {"include_external_imports": True}, {"max_nodes": 3}),
        ("analysis.impact", {"target": "shop.pricing.price", "depth": 3}, {"max_nodes": 1}),
        ("analysis.findings", {}, {"max_text_bytes": 1000}),
        ("analysis.motifs", {}, {"max_nodes": 1}),
    ],
)
def test_every_budget_truncates_and_resumes_exactly(
    shop: tuple[str, Path], operation: str, request_body: dict[str, Any], budget: dict[str, int]
) -> None:
    ws, store = shop
    request = {"workspace_id": ws, **request_body}
    whole = ok(operation, request, store)
    assert whole["continuation"] is None
    paged, count = pages(operation, {**request, "budget": budget}, store)
    assert count > 1
    expected = {k: v for k, v in whole["data"].items() if isinstance(v, list) and k != "relations"}
    assert {k: v for k, v in paged.items() if k in expected} == expected
    # Same query again: same first page (stable order).
    first = ok(operation, {**request, "budget": budget}, store)
    again = ok(operation, {**request, "budget": budget}, store)
    assert first["data"] == again["data"] and first["continuation"] == again["continuation"]


def test_every_error_code(shop: tuple[str, Path], tmp_path: Path) -> None:
    ws, store = shop
    first = call("query.unknowns", {"workspace_id": ws, "budget": {"max_nodes": 1}}, store=store)
    token = first["continuation"]["continuation_token"]
    damaged_root = write_tree(tmp_path / "damaged", {"m.py": "x = 1\n"})
    damaged = build_workspace(damaged_root, store=tmp_path / "store")["workspace_id"]
    manifest = tmp_path / "store" / "workspaces" / damaged / "manifest.json"
    manifest.write_text(manifest.read_text()[:40])
    cases = {
        "WORKSPACE_NOT_FOUND": ("workspace.describe", {"workspace_id": "ws_000000000000"}, store),
        "OBJECT_NOT_FOUND": (
            "query.subgraph",
            {"workspace_id": ws, "anchor": {"kind": "symbol", "value": "shop.cart.Cartt"}},
            store,
        ),
        "INVALID_QUERY": (
            "query.unknowns",
            {"workspace_id": ws, "continuation_token": token, "reason": "x"},
            store,
        ),
        "TYPE_MISMATCH": ("analysis.contracts", {"workspace_id": ws, "target": "shop.cart.COUNT"}, store),
        "CAPABILITY_DENIED": ("projection.apply", {"workspace_id": ws, "delta_id": "dl_0123"}, store),
        "POLICY_BLOCKED": (
            "query.search",
            {"workspace_id": ws, "text": "", "budget": {"max_nodes": 10**6}},
            store,
        ),
        "OPERATOR_UNAVAILABLE": ("delta.merge", {"workspace_id": ws}, store),
        "UNSUPPORTED_PROJECTION": (
            "query.subgraph",
            {
                "workspace_id": ws,
                "anchor": {"kind": "symbol", "value": "shop.pricing.price"},
                "projection": "patch",
            },
            store,
        ),
        "UNRESOLVED_REQUIRED_INPUT": (
            "analysis.impact",
            {"workspace_id": ws, "target": "subprocess.run"},
            store,
        ),
        "CONFLICT_REQUIRES_REVIEW": (
            "analysis.impact",
            {"workspace_id": ws, "target": "shop.pricing.discount"},
            store,
        ),
        "EXECUTION_FAILED": (
            "analysis.semantic_diff",
            {"workspace_id": ws, "rev_a": "HEAD~1", "rev_b": "HEAD"},
            store,
        ),
        "VALIDATION_FAILED": ("workspace.describe", {"workspace_id": damaged}, tmp_path / "store"),
    }
    assert set(cases) == set(ERROR_CODES)
    for code, (operation, request, where) in cases.items():
        result = call(operation, request, store=where)
        assert set(result) == ENVELOPE_KEYS | {"error"}
        assert result["status"] == "error" and result["error"]["code"] == code, (code, result["error"])
        assert len(result["error"]["message"]) > 30
    # More ways in: wrong JSON types, unknown fields, not even a dict; none of them raises.
    assert (
        call(
            "query.subgraph",
            {"workspace_id": ws, "anchor": {"kind": "symbol", "value": "x"}, "depth": "2"},
            store=store,
        )["error"]["code"]
        == "TYPE_MISMATCH"
    )
    assert (
        call("query.search", {"workspace_id": ws, "text": "", "bogus": 1}, store=store)["error"]["code"]
        == "INVALID_QUERY"
    )
    not_a_dict: Any = ["not", "a", "dict"]
    assert call("query.search", not_a_dict, store=store)["error"]["code"] == "TYPE_MISMATCH"
    assert call("impact", {}, store=store)["error"]["code"] == "OPERATOR_UNAVAILABLE"
    other = call("query.search", {"workspace_id": ws, "text": "", "continuation_token": token}, store=store)
    assert other["error"]["code"] == "INVALID_QUERY" and "different query" in other["error"]["message"]


def test_an_internal_fault_is_logged_and_masked(
    shop: tuple[str, Path], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from slotrelay.psmr.ops import queries

    ws, store = shop

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(queries, "conflicts", broken)
    with caplog.at_level(logging.ERROR, logger="slotrelay.psmr"):
        result = call("query.conflicts", {"workspace_id": ws}, store=store)
    message = result["error"]["message"]
    assert result["error"]["code"] == "EXECUTION_FAILED" and "secret" not in message
    assert f"incident {result['request_id']}" in message
    logged = [r for r in caplog.records if result["request_id"] in r.getMessage()]
    assert logged and "secret internal detail" in str(logged[0].exc_info[1])


def test_findings_of_one_symbol_stay_in_their_own_lists(tmp_path: Path) -> None:
    # One long function with an undefined name and an unused import: a defect, an anomaly and a
    # hotspot about the same symbol, each in its list alone, none folded into another.
    body = "".join(f"    total = total + {i}\n" for i in range(130))
    root = write_tree(
        tmp_path / "tree",
        {"big.py": f"import os\n\n\ndef long():\n    total = MISSING\n{body}    return total\n"},
    )
    ws = build_workspace(root, store=tmp_path / "s")["workspace_id"]
    found = ok("analysis.findings", {"workspace_id": ws}, tmp_path / "s")["data"]
    assert [(f["rule"], f["subject"]) for f in found["confirmed_defect"]] == [
        ("pyflakes:UndefinedName", "semantic:big.long")
    ]
    assert [(f["rule"], f["subject"]) for f in found["anomaly"]] == [
        ("pyflakes:UnusedImport", "semantic:big")
    ]
    assert [(f["rule"], f["subject"]) for f in found["hotspot"]] == [("lines", "semantic:big.long")]
    for kind in ("confirmed_defect", "anomaly", "hotspot"):
        assert {f["kind"] for f in found[kind]} == {kind}
    ids = [f["id"] for kind in ("confirmed_defect", "anomaly", "hotspot") for f in found[kind]]
    assert len(ids) == len(set(ids)) == 3
