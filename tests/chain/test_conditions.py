"""Route conditions and checks: every operator, missing fields, wrong types, additional checks."""

from __future__ import annotations

from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from slotrelay.chain import evaluate_routes, validate_document
from slotrelay.chain.checks import failed_checks, identity_problems
from slotrelay.chain.conditions import evaluate_condition
from slotrelay.chain.models import Condition, JsonSchemaCheck
from tests.support.chain_specs import node, route

CHAIN = validate_document({"chain_id": "c", "nodes": [node("a", start=True)]}).bind(source=None)
DOC = {"node_id": "a", "status": "completed",
       "data": {"items": ["x", "y"], "name": "abc", "n": 3, "nested": {"k": [1]}}}


@pytest.mark.parametrize(
    ("field", "operator", "value", "held", "reason"),
    [
        ("status", "equals", "completed", True, 'status equals "completed"'),
        ("status", "equals", "failed", False, 'status is "completed", not "failed"'),
        ("data.n", "equals", 3, True, "data.n equals 3"),
        ("status", "in", ["completed", "skipped"], True, "is in"),
        ("status", "in", ["failed"], False, "is not in"),
        ("status", "in", "completed", False, "operator 'in' needs a list value"),
        ("data.items", "length_greater_than", 1, True, "len(data.items) = 2 > 1"),
        ("data.items", "length_greater_than", 2, False, "len(data.items) = 2 <= 2"),
        ("data.name", "length_equals", 3, True, "len(data.name) = 3 == 3"),
        ("data.items", "length_equals", 3, False, "len(data.items) = 2 != 3"),
        ("data.nested.k.0", "equals", 1, True, "data.nested.k.0 equals 1"),
        ("data.n", "length_equals", 1, False, "data.n = 3 has no length"),
        ("data.items", "length_equals", "2", False, "needs an integer value"),
        ("data.items", "length_equals", True, False, "needs an integer value"),
        ("data.absent", "equals", 1, False, "data.absent is missing"),
        ("data.items.9", "equals", 1, False, "data.items.9 is missing"),
    ],
)
def test_operators(field: str, operator: str, value: object, held: bool, reason: str) -> None:
    result = evaluate_condition(Condition(field=field, operator=operator, value=value), DOC, chain=CHAIN)
    assert result.ok is held
    assert reason in result.reason


def test_no_condition_always_holds() -> None:
    assert evaluate_condition(None, {}, chain=CHAIN).ok


def test_additional_checks(tmp_path: Path) -> None:
    chain = validate_document({"chain_id": "c", "nodes": [node("a", start=True)]}).bind(
        source=tmp_path / "c.json")
    (tmp_path / "scan.txt").write_text("x")
    (tmp_path / "schema.json").write_text('{"type": "object", "required": ["data"], '
                                          '"properties": {"data": {"required": ["scan_file"]}}}')
    condition = Condition(field="status", operator="equals", value="completed", additional_checks=[
        {"path_exists": "data.scan_file"}, {"field_equals": ["data.ok", True]},
        {"json_schema": "schema.json"},
        "a person looked at it",
    ])
    document = {"status": "completed", "data": {"scan_file": "scan.txt", "ok": True},
                "checks": {"a person looked at it": True}}
    assert evaluate_condition(condition, document, chain=chain).ok
    for broken, reason in [
        ({"data": {"scan_file": "nope.txt", "ok": True}}, "data.scan_file = 'nope.txt': no such file"),
        ({"data": {"scan_file": "scan.txt", "ok": False}}, "data.ok is False, expected True"),
        ({"checks": {}}, "free-text check not attested"),
        ({"data": {"ok": True}}, "data.scan_file is missing or not a path"),
    ]:
        result = evaluate_condition(condition, {**document, **broken}, chain=chain)
        assert not result.ok and reason in result.reason, result.reason
    assert failed_checks([JsonSchemaCheck(json_schema="missing.json")], document, chain=chain)[0].startswith(
        "schema missing.json unusable")


def test_a_json_schema_is_compiled_once_per_version_of_its_file(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A chain checks the same schema on every node: it is read and checked against the meta-schema once,
    and a schema file written again is read again."""
    compiled: list[object] = []
    check_schema = Draft202012Validator.check_schema
    monkeypatch.setattr(Draft202012Validator, "check_schema", classmethod(
        lambda cls, schema, **kw: (compiled.append(schema), check_schema(schema))))
    chain = validate_document({"chain_id": "c", "nodes": [node("a", start=True)]}).bind(
        source=tmp_path / "c.json")
    schema = tmp_path / "schema.json"
    schema.write_text('{"required": ["data"]}')
    checks = [JsonSchemaCheck(json_schema="schema.json")]
    for _ in range(5):
        assert failed_checks(checks, {"data": {}}, chain=chain) == []
    assert len(compiled) == 1
    replacement = tmp_path / "schema.json.new"
    replacement.write_text('{"required": ["data", "status"]}')
    replacement.replace(schema)
    assert failed_checks(checks, {"data": {}}, chain=chain) == ["$: 'status' is a required property"]
    schema.write_text('{"required": ["status", "data", "error"]}')
    assert failed_checks(checks, {"data": {}, "status": "completed"}, chain=chain) == [
        "$: 'error' is a required property"]
    schema.write_text("{not json")
    assert failed_checks(checks, {"data": {}}, chain=chain)[0].startswith("schema schema.json unusable")
    assert len(compiled) == 3


def test_identity_check() -> None:
    spec = validate_document({"chain_id": "c", "nodes": [node("a", start=True, capabilities=["Read"],
                                                            forbidden_capabilities=["scp"])]}).nodes[0]
    assert identity_problems(spec, {"node_id": "a", "capabilities_used": ["Read"]}) == []
    assert identity_problems(spec, {"node_id": "b", "capabilities_used": ["scp", "Edit"]}) == [
        "slot node_id is 'b', expected 'a'",
        "forbidden capabilities used: scp",
        "capabilities used but not declared: Edit",
    ]


def test_routes_in_priority_order_and_identity_blocks_routing() -> None:
    chain = validate_document({
        "chain_id": "c",
        "nodes": [node("a", start=True), node("b"), node("c")],
        "routes": [route("a", "b", priority="P2"), route("a", "c", priority="P0",
                   condition={"field": "data.n", "operator": "equals", "value": 4})],
    }).bind(source=None)
    decisions = evaluate_routes(chain, "a", DOC)
    assert [(d.to_node, d.fired) for d in decisions] == [("c", False), ("b", True)]
    impostor = evaluate_routes(chain, "a", {**DOC, "node_id": "z"})
    assert not any(d.fired for d in impostor)
    assert impostor[0].reason.startswith("identity check failed: slot node_id is 'z'")
