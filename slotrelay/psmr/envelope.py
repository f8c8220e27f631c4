"""The result envelope every operator answers in (`psmr-tool-result-0.1`, CONTRACTS.md#result-envelope).

`data` holds the operator's result; `evidence_refs`, `unknown_refs` and `conflict_refs` list the ids
the result rests on, so an agent sees what is unknown next to what is known (CONTRACTS.md#semantic-slice).
`continuation` is null, or `{"truncated": true, "continuation_token": ..., "exhausted": <budget>}`.
`render` is the one text form of an envelope: what the CLI prints, what the MCP server sends as text,
and what `budget.max_text_bytes` measures.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

SCHEMA = "psmr-tool-result-0.1"
# The fields every envelope carries, ok or error (an error adds `error`).
FIELDS = (
    "schema",
    "request_id",
    "status",
    "data",
    "evidence_refs",
    "unknown_refs",
    "conflict_refs",
    "warnings",
    "continuation",
)


def render(answer: dict[str, Any]) -> str:
    """The envelope as sent and printed: compact JSON (one line), non-ASCII kept as is."""
    return json.dumps(answer, ensure_ascii=False)


def text_bytes(answer: dict[str, Any]) -> int:
    """The size of `render(answer)` in UTF-8 bytes, the measure of `max_text_bytes`."""
    return len(render(answer).encode())


def new_request_id() -> str:
    """A fresh request id (`req_` and 16 hex digits)."""
    return f"req_{uuid.uuid4().hex[:16]}"


def ok(
    request_id: str,
    data: dict[str, Any],
    *,
    evidence_refs: list[str] | None = None,
    unknown_refs: list[str] | None = None,
    conflict_refs: list[str] | None = None,
    warnings: list[str] | None = None,
    continuation: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An envelope with status `ok`.

    Parameters:
        request_id: the id of the request answered.
        data: the operator's result.
        evidence_refs: evidence ids the result rests on.
        unknown_refs: unknown ids inside the result.
        conflict_refs: conflict ids touching the result.
        warnings: things the caller should know (e.g. an item larger than the text budget).
        continuation: the continuation record when the result was truncated.

    Returns:
        The envelope as a JSON-ready dict.
    """
    return {
        "schema": SCHEMA,
        "request_id": request_id,
        "status": "ok",
        "data": data,
        "evidence_refs": sorted(set(evidence_refs or [])),
        "unknown_refs": sorted(set(unknown_refs or [])),
        "conflict_refs": sorted(set(conflict_refs or [])),
        "warnings": list(warnings or []),
        "continuation": continuation,
    }


def error(
    request_id: str, code: str, message: str, *, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    """An envelope with status `error` and `{"code", "message"}`.

    Parameters:
        request_id: the id of the request answered.
        code: one of the twelve codes in `slotrelay.psmr.errors.ERROR_CODES`.
        message: what went wrong and what to do instead.
        details: structured reasons, carried as `data` (e.g. delta.validate's failed checks).

    Returns:
        The envelope as a JSON-ready dict.
    """
    return {
        "schema": SCHEMA,
        "request_id": request_id,
        "status": "error",
        "data": details,
        "error": {"code": code, "message": message},
        "evidence_refs": [],
        "unknown_refs": [],
        "conflict_refs": [],
        "warnings": [],
        "continuation": None,
    }
