"""Requests are checked by a pydantic-core validator compiled from their JSON Schema, with jsonschema
deciding whatever it does not accept: the verdict must be jsonschema's for every request, valid or not.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from jsonschema import Draft202012Validator

from psmr_mcp import catalog
from slotrelay.psmr.operators import OPERATIONS
from slotrelay.psmr.request_schema import RequestSchema
from tests.support.schema_draws import strategies_built_once

SCHEMAS: dict[str, dict[str, Any]] = {
    **{operation: spec["input_schema"] for operation, spec in OPERATIONS.items()},
    **{spec.name: catalog.input_schema(spec) for spec in catalog.ALL_TOOLS},
}
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)


@st.composite
def near(draw: st.DrawFn, valid: st.SearchStrategy[Any]) -> Any:
    """A request drawn from `valid` (a schema's requests), or one changed in one place: a member
    dropped, one added, one replaced by any JSON value, or a member's value replaced inside it."""
    request = draw(valid)
    if not isinstance(request, dict) or not request:
        return request
    key = draw(st.sampled_from(sorted(request)))
    change = draw(st.sampled_from(["none", "drop", "add", "replace", "inner"]))
    if change == "drop":
        del request[key]
    elif change == "add":
        request[draw(st.text(min_size=1, max_size=8))] = draw(JSON)
    elif change == "replace":
        request[key] = draw(JSON)
    elif change == "inner" and isinstance(request[key], dict) and request[key]:
        inner = draw(st.sampled_from(sorted(request[key])))
        request[key] = {**request[key], inner: draw(JSON)}
    elif change == "inner" and isinstance(request[key], list) and request[key]:
        request[key] = [*request[key], draw(JSON)]
    return request


# A schema the validator cannot express is judged by jsonschema alone: nothing to compare there (and
# hypothesis-jsonschema draws from its conditionals very slowly).
COMPILED = sorted(name for name, schema in SCHEMAS.items() if RequestSchema(schema).compiled)


@pytest.fixture(scope="module")
def built_once() -> Iterator[None]:
    with strategies_built_once():
        yield


# Its @given is inside the test, where tests/conftest.py's filter for hypothesis tests does not see it:
# once a test on the same worker has run a flow in-process, Prefect's threads move the global `random`.
@pytest.mark.filterwarnings(
    "ignore:Do not use the `random` module inside strategies:hypothesis.errors.HypothesisDeprecationWarning"
)
@pytest.mark.usefixtures("built_once")
@pytest.mark.parametrize("name", COMPILED)
def test_the_verdict_is_jsonschemas(name: str) -> None:
    schema = SCHEMAS[name]
    checked = RequestSchema(schema)
    judge = Draft202012Validator(schema)

    # The strategy is built once: hypothesis-jsonschema canonicalises the schema and parses its own
    # source again each time it builds one, which cost a third of this test when done per example.
    @FUZZ
    @given(near(from_schema(schema)))
    def agree(request: Any) -> None:
        assert (checked.violations(request) == []) == judge.is_valid(request), request

    agree()


@pytest.mark.parametrize(
    ("value", "valid"),
    [(1, True), (1.0, True), (True, False), ("1", False), (-1, False)],
)
def test_strict_types_defer_to_jsonschema(value: Any, valid: bool) -> None:
    """1.0 is an integer to JSON Schema and not to the compiled check, True is no integer to either:
    what the check rejects, jsonschema decides."""
    checked = RequestSchema({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}})
    assert (checked.violations({"n": value}) == []) is valid


def test_what_an_agent_asks_first_is_checked_without_jsonschema() -> None:
    """Only a schema of conditionals (delta.propose's operations) is left to jsonschema whole."""
    uncompiled = sorted(name for name, schema in SCHEMAS.items() if RequestSchema(schema).compiled is False)
    assert uncompiled == ["delta.propose", "psmr_delta_propose"]
