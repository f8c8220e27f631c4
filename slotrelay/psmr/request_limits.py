"""Request size limits: every request an agent sends is bounded before anything parses what it
carries (docs/mcp.md#request-size-limits).

Two bounds, checked in this order: each string and each array, at most the `maxLength` /
`maxItems` its operator's request schema states (a body or source 100,000 characters, a parameter
list 2,000, a target 500, ...); then the whole request, at most `MAX_REQUEST_BYTES` of JSON. Past either the
request is POLICY_BLOCKED, naming the field and the limit, whatever else is wrong with it: a 5 MB
body is refused by its length, never handed to a parser. The MCP server checks its tools' (tighter
or equal) schemas the same way before the core sees the call.
"""

from __future__ import annotations

import json
from typing import Any

from slotrelay.psmr.errors import PolicyBlocked
from slotrelay.psmr.operators import MAX_REQUEST_BYTES


def _where(path: list[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "the request"


def _walk(schema: dict[str, Any], value: Any, path: list[str | int], operation: str) -> None:
    if isinstance(value, str) and len(value) > schema.get("maxLength", len(value)):
        raise PolicyBlocked(
            f"{operation}: {_where(path)} is {len(value):,} characters long, above the limit of "
            f"{schema['maxLength']:,}; send less (docs/mcp.md#request-size-limits)"
        )
    if isinstance(value, list):
        if len(value) > schema.get("maxItems", len(value)):
            raise PolicyBlocked(
                f"{operation}: {_where(path)} has {len(value):,} items, above the limit of "
                f"{schema['maxItems']:,}; split the request (docs/mcp.md#request-size-limits)"
            )
        items = schema.get("items")
        if isinstance(items, dict):
            for index, item in enumerate(value):
                _walk(items, item, [*path, index], operation)
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = properties.get(key, extra if isinstance(extra, dict) else None)
            if sub is not None:
                _walk(sub, item, [*path, str(key)], operation)


def check(operation: str, schema: dict[str, Any], request: Any) -> None:
    """Refuse a request past a size limit.

    Parameters:
        operation: the operator or tool, named in the message.
        schema: its request schema (the `maxLength` and `maxItems` it states are the limits).
        request: the request as received.

    Raises:
        PolicyBlocked: the request, or one of its fields, is past its limit.
    """
    _walk(schema, request, [], operation)
    size = len(json.dumps(request, ensure_ascii=False, default=str).encode("utf-8", errors="replace"))
    if size > MAX_REQUEST_BYTES:
        raise PolicyBlocked(
            f"{operation}: the request is {size:,} bytes of JSON, above the limit of {MAX_REQUEST_BYTES:,}; "
            "send less (docs/mcp.md#request-size-limits)"
        )
