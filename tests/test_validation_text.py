"""A failed validation reads the same wherever it is reported: "where: what is wrong"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, ValidationError, field_validator

from slotrelay.chain.alerts import AlertError, read_alert
from slotrelay.chain.slots import SlotInvalid, output_slot_from_bytes
from slotrelay.pen.errors import InvalidPenRequest
from slotrelay.pen.models import parse_request
from slotrelay.psmr.api import call
from slotrelay.validation_text import first_problem, json_path, model_problems, problem_text, schema_problem


class Inner(BaseModel):
    port: int

    @field_validator("port")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value <= 0:
            raise ValueError(f"{value} is not a port")
        return value


class Outer(BaseModel):
    hosts: list[Inner]


def _refusal(model: type[BaseModel], document: object) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(document)
    return caught.value


def test_a_pydantic_problem_names_its_field_dotted_or_as_a_json_path() -> None:
    refused = _refusal(Outer, {"hosts": [{"port": 1}, {"port": -1}]})
    assert model_problems(refused) == ["hosts.1.port: -1 is not a port"]
    assert model_problems(refused, path=json_path) == ["$.hosts[1].port: -1 is not a port"]
    assert first_problem(refused) == "hosts.1.port: -1 is not a port"


def test_a_problem_of_the_whole_document_is_its_message_alone() -> None:
    assert model_problems(_refusal(Outer, [1])) == ["Input should be a valid dictionary or instance of Outer"]
    assert problem_text(["network"], "network.allow: '10.0.0.1' is an IP address") == (
        "network.allow: '10.0.0.1' is an IP address"
    )


def test_limit_keeps_the_first_problems_in_order() -> None:
    refused = _refusal(Outer, {"hosts": [{"port": "a"}, {"port": "b"}, {}]})
    assert model_problems(refused, limit=2) == [
        "hosts.0.port: Input should be a valid integer, unable to parse string as an integer",
        "hosts.1.port: Input should be a valid integer, unable to parse string as an integer",
    ]


def test_a_schema_violation_reads_as_a_pydantic_problem_does() -> None:
    validator = Draft202012Validator(
        {"properties": {"hosts": {"items": {"properties": {"port": {"type": "integer"}}}}}}
    )
    (violation,) = validator.iter_errors({"hosts": [{"port": 1}, {"port": "x"}]})
    assert schema_problem(violation) == "hosts.1.port: 'x' is not of type 'integer'"
    assert schema_problem(violation, path=json_path) == f"{violation.json_path}: 'x' is not of type 'integer'"


def test_the_psmr_api_names_a_nested_field_as_the_mcp_server_does(tmp_path: Path) -> None:
    # Was "field budget/max_nodes: ..." here and "budget.max_nodes: ..." from the MCP server.
    answer = call(
        "query.search",
        {"workspace_id": "ws_000000000000", "text": "x", "budget": {"max_nodes": "lots"}},
        store=tmp_path / "store",
    )
    assert answer["error"]["code"] == "TYPE_MISMATCH"
    assert answer["error"]["message"].startswith(
        "query.search: budget.max_nodes: 'lots' is not of type 'integer';"
    )
    # A missing field is named by jsonschema's own message, not by a placeholder for the request.
    missing = call("query.search", {"workspace_id": "ws_000000000000"}, store=tmp_path / "store")
    assert missing["error"]["message"].startswith("query.search: 'text' is a required property;")


def test_a_pen_request_that_is_not_an_object_says_so_without_a_placeholder() -> None:
    # Was "invalid pen.write request: (root): Input should be ...".
    with pytest.raises(InvalidPenRequest) as refused:
        parse_request([1])
    assert (
        refused.value.message
        == "invalid pen.write request: Input should be a valid dictionary or instance of PenRequest"
    )


def test_an_output_slot_and_an_alert_name_the_field_the_same_way(tmp_path: Path) -> None:
    slot = tmp_path / "x_output.json"
    with pytest.raises(SlotInvalid) as bad_slot:
        output_slot_from_bytes(slot, json.dumps({"node_id": "x", "status": 3}).encode(), written_at=0.0)
    assert "status: Input should be a valid string" in str(bad_slot.value)
    alert = tmp_path / "x_alert.json"
    alert.write_text(json.dumps({"node_id": 3}))
    with pytest.raises(AlertError) as bad_alert:
        read_alert(alert)
    assert f"{alert}: not an alert (" in str(bad_alert.value)
    assert "Value error, " not in str(bad_alert.value) + str(bad_slot.value)
