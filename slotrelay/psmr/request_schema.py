"""Checking a request against its JSON Schema: pydantic-core accepts the valid ones, jsonschema
explains the others.

A request is checked on every call, and the MCP server's first answer should not wait for jsonschema's
import (attrs, referencing, the format checkers: about as long as the search it answers). So each
schema is also compiled, once, to a pydantic-core validator, which the MCP SDK has already imported,
and a request it accepts is valid. The translation covers the keywords the operator catalog uses, and
is never more lenient than JSON Schema (strict types: `1.0` is not an integer, `True` not a number;
string enums only); where a schema holds anything else (`if`/`then`, `allOf`, `uniqueItems`, ...), or
the validator rejects the request, jsonschema (draft 2020-12) decides, and its errors are what a
caller is told. So jsonschema stays the one judge of validity and the one source of the messages; the
validator only spares it the requests that are certainly valid.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic_core import SchemaValidator, core_schema

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

# Members that do not constrain a value.
ANNOTATIONS = frozenset({"description", "default", "title", "examples", "$comment"})
# What each JSON type may carry for the translation to hold.
TYPE_KEYWORDS: dict[str, frozenset[str]] = {
    "string": frozenset({"minLength", "maxLength", "pattern"}),
    "integer": frozenset({"minimum", "maximum"}),
    "number": frozenset({"minimum", "maximum"}),
    "boolean": frozenset(),
    "null": frozenset(),
    "array": frozenset({"items", "minItems", "maxItems", "uniqueItems"}),
    "object": frozenset({"properties", "required", "additionalProperties"}),
}


class RequestSchema:
    """A request schema and its compiled validator.

    Parameters:
        schema: a JSON Schema (draft 2020-12) object.

    Attributes:
        compiled: False when the schema holds what the validator cannot express, so that jsonschema
            checks every request.
    """

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        core = _core(schema)
        self.compiled = core is not None
        self._accepts = SchemaValidator(core).isinstance_python if core is not None else None
        self._judge: Any = None

    def violations(self, request: Any) -> list[ValidationError]:
        """What is wrong with a request (nothing when it is valid).

        Parameters:
            request: the request, as parsed from JSON.

        Returns:
            jsonschema's errors, in the order it finds them.
        """
        if self._accepts is not None and self._accepts(request):
            return []
        if self._judge is None:
            from jsonschema import Draft202012Validator

            self._judge = Draft202012Validator(self.schema)
        return list(self._judge.iter_errors(request))


def _core(schema: Any) -> core_schema.CoreSchema | None:
    """The pydantic-core schema accepting no more than the JSON Schema does, or None when the schema
    holds what it cannot express."""
    if not isinstance(schema, dict):
        return None
    keys = schema.keys() - ANNOTATIONS
    if "enum" in schema or "const" in schema:
        values = schema["enum"] if "enum" in schema else [schema["const"]]
        plain = keys <= {"enum", "const", "type"} and schema.get("type", "string") == "string"
        if not plain or not isinstance(values, list) or not all(type(v) is str for v in values):
            return None
        return core_schema.literal_schema(values)
    named = schema.get("type")
    if named is None:
        return core_schema.any_schema() if not keys else None
    types = named if isinstance(named, list) else [named]
    if not all(isinstance(t, str) and t in TYPE_KEYWORDS for t in types):
        return None
    if keys - {"type"} - frozenset().union(*(TYPE_KEYWORDS[t] for t in types)):
        return None
    choices: list[core_schema.CoreSchema] = []
    for name in types:
        choice = _typed(name, schema)
        if choice is None:
            return None
        choices.append(choice)
    return choices[0] if len(choices) == 1 else core_schema.union_schema([*choices])


def _typed(name: str, schema: dict[str, Any]) -> core_schema.CoreSchema | None:
    bounds = [schema.get(k) for k in ("minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems")]
    if not all(b is None or type(b) is int for b in bounds):
        return None
    if name == "string":
        pattern = schema.get("pattern")
        if pattern is not None and not isinstance(pattern, str):
            return None
        return core_schema.str_schema(
            pattern=pattern,
            min_length=schema.get("minLength"),
            max_length=schema.get("maxLength"),
            strict=True,
            regex_engine="python-re",
        )
    if name == "integer":
        return core_schema.int_schema(ge=schema.get("minimum"), le=schema.get("maximum"), strict=True)
    if name == "number":
        return core_schema.float_schema(
            ge=schema.get("minimum"), le=schema.get("maximum"), strict=True, allow_inf_nan=False
        )
    if name == "boolean":
        return core_schema.bool_schema(strict=True)
    if name == "null":
        return core_schema.none_schema()
    if name == "array":
        items = _core(schema.get("items", {}))
        if items is None:
            return None
        listed = core_schema.list_schema(
            items, min_length=schema.get("minItems"), max_length=schema.get("maxItems"), strict=True
        )
        if schema.get("uniqueItems") is not True:
            return listed
        # Strings are equal in JSON exactly when they are in Python; other items are left to jsonschema.
        if schema.get("items", {}).get("type") != "string":
            return None
        return core_schema.no_info_after_validator_function(_distinct, listed)
    return _object(schema)


def _object(schema: dict[str, Any]) -> core_schema.CoreSchema | None:
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not (isinstance(properties, dict) and isinstance(required, list)):
        return None
    if set(required) - properties.keys():
        return None
    fields = {}
    for name, member in properties.items():
        inner = _core(member)
        if inner is None:
            return None
        fields[name] = core_schema.typed_dict_field(inner, required=name in required)
    if extra is True:
        return core_schema.typed_dict_schema(fields, extra_behavior="allow", strict=True)
    if extra is False:
        return core_schema.typed_dict_schema(fields, extra_behavior="forbid", strict=True)
    extras = _core(extra)
    if extras is None:
        return None
    return core_schema.typed_dict_schema(fields, extra_behavior="allow", extras_schema=extras, strict=True)


def _distinct(values: list[str]) -> list[str]:
    if len(set(values)) != len(values):
        raise ValueError("the items are not unique")
    return values
