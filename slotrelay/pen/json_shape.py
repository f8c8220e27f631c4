"""The shape of a JSON value as a JSON Schema: what the model is told about upstream_inputs
(never the values themselves) and what a shared tool's io_contract declares.
"""

from __future__ import annotations

from typing import Any

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_MAX_DEPTH = 8


def infer_schema(value: Any, *, _depth: int = 0) -> dict[str, Any]:
    """A JSON Schema describing `value`'s types and keys (not its contents).

    Parameters:
        value: any JSON-compatible value.

    Returns:
        A schema: objects list their properties (all required), arrays the union of their items' shapes.
    """
    if _depth >= _MAX_DEPTH:
        return {}
    if value is None:
        return {"type": "null"}
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, dict):
        return {
            "type": "object",
            "properties": {str(key): infer_schema(item, _depth=_depth + 1) for key, item in value.items()},
            "required": sorted(str(key) for key in value),
        }
    if isinstance(value, (list, tuple)):
        shapes: list[dict[str, Any]] = []
        for item in value:
            shape = infer_schema(item, _depth=_depth + 1)
            if shape not in shapes:
                shapes.append(shape)
        if not shapes:
            return {"type": "array"}
        if _numbers_only(shapes):
            return {"type": "array", "items": {"type": "number"}}
        return {"type": "array", "items": shapes[0] if len(shapes) == 1 else {"anyOf": shapes}}
    return {}


def _numbers_only(shapes: list[dict[str, Any]]) -> bool:
    # [1, 2.5] is a list of numbers, not "integer or number".
    return len(shapes) > 1 and all(shape.get("type") in ("integer", "number") for shape in shapes)


def document_schema(value: Any) -> dict[str, Any]:
    """`infer_schema` with the `$schema` dialect, for a standalone schema document."""
    return {"$schema": SCHEMA_DIALECT, **infer_schema(value)}
