"""Budgets and continuation (section 八): cut a result into pages without ever truncating silently.

An operator lays its result out as ordered sections of items (nodes, edges, evidence, unknowns, ...),
each already in a stable order. `paginate` walks them with one cursor and stops at the first item
that would pass a budget; the continuation token records the cursor together with a fingerprint of
the request and the workspace version, so resuming yields exactly the next items, and a token used
on another request or a changed workspace is refused instead of giving a mixed answer.

Invariant: pages concatenated in order equal the untruncated result.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from slotrelay.psmr.errors import InvalidQuery, PolicyBlocked
from slotrelay.psmr.operators import DEFAULT_BUDGET

# Past these a request is a dump of the graph in disguise (section 十四): use the export command.
HARD_CEILING: dict[str, int] = {
    "max_nodes": 5_000,
    "max_edges": 15_000,
    "max_evidence_items": 2_000,
    "max_text_bytes": 2_000_000,
}
# Which budget a section's items count against; any other section counts against max_nodes.
SECTION_COUNTER: dict[str, str] = {
    "edges": "max_edges",
    "evidence": "max_evidence_items",
}


@dataclass
class Page:
    """One page of a result: the sections' items that fit, and the continuation if any."""

    sections: dict[str, list[Any]]
    truncated: bool = False
    continuation: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)


def effective_budget(request: dict[str, Any]) -> dict[str, int]:
    """The request's budget over the defaults, refused past the hard ceiling.

    Parameters:
        request: the operator request (its optional `budget` member is read).

    Returns:
        The four limits.

    Raises:
        PolicyBlocked: a limit above the hard ceiling.
    """
    budget = {**DEFAULT_BUDGET, **(request.get("budget") or {})}
    for name, ceiling in HARD_CEILING.items():
        if budget[name] > ceiling:
            raise PolicyBlocked(
                f"budget.{name}={budget[name]} is above {ceiling}: PSMR does not dump whole graphs "
                "(section 十四); page with continuation_token, narrow the query, or export with "
                "`slotrelay psmr callgraph`"
            )
    return budget


def fingerprint(operation: str, request: dict[str, Any]) -> str:
    """A digest of the request without its paging members, to bind a token to its query."""
    body = {k: v for k, v in request.items() if k not in ("budget", "continuation_token")}
    text = json.dumps([operation, body], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def encode_token(state: dict[str, Any]) -> str:
    """Encode a cursor state as an opaque URL-safe token."""
    return base64.urlsafe_b64encode(json.dumps(state, sort_keys=True).encode()).decode().rstrip("=")


def decode_token(token: str, *, operation: str, request: dict[str, Any], version: str) -> tuple[int, int]:
    """The cursor (section index, item index) a token resumes from.

    Parameters:
        token: the continuation token from a truncated result.
        operation: the operation now called.
        request: the request now made.
        version: the workspace version now stored.

    Returns:
        The section and item index to resume at.

    Raises:
        InvalidQuery: the token is malformed, belongs to another query, or the workspace changed.
    """
    try:
        state = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        section, item = int(state["s"]), int(state["i"])
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidQuery(
            "continuation_token is not a token this runtime issued; repeat the query without it"
        ) from exc
    if state.get("op") != operation or state.get("fp") != fingerprint(operation, request):
        raise InvalidQuery(
            "continuation_token belongs to a different query; resend the original request unchanged "
            "with only the token added"
        )
    if state.get("v") != version:
        raise InvalidQuery(
            "the workspace was rebuilt since this continuation_token was issued; repeat the query "
            "without the token"
        )
    return section, item


def _size(item: Any) -> int:
    return len(json.dumps(item, default=str, ensure_ascii=False).encode())


def paginate(
    sections: list[tuple[str, list[Any]]],
    *,
    operation: str,
    request: dict[str, Any],
    version: str,
) -> Page:
    """Cut ordered sections to the request's budget, resuming from its continuation token if any.

    Parameters:
        sections: (name, items) pairs, each list in a stable order.
        operation: the operation answering (bound into the token).
        request: the request (its budget and continuation_token are read).
        version: the workspace version (bound into the token).

    Returns:
        The page; `truncated` and a continuation when items remain.

    Raises:
        PolicyBlocked: a budget above the hard ceiling.
        InvalidQuery: a continuation token that does not fit this query.
    """
    budget = effective_budget(request)
    start_section, start_item = 0, 0
    token = request.get("continuation_token")
    if token:
        start_section, start_item = decode_token(token, operation=operation, request=request, version=version)
    used = dict.fromkeys(DEFAULT_BUDGET, 0)
    page = Page(sections={name: [] for name, _ in sections})
    for s_index, (name, items) in enumerate(sections):
        if s_index < start_section:
            continue
        counter = SECTION_COUNTER.get(name, "max_nodes")
        first = start_item if s_index == start_section else 0
        for i_index in range(first, len(items)):
            size = _size(items[i_index])
            over = (
                used[counter] + 1 > budget[counter]
                or used["max_text_bytes"] + size > budget["max_text_bytes"]
            )
            if over and any(used.values()):
                exhausted = counter if used[counter] + 1 > budget[counter] else "max_text_bytes"
                state = {"op": operation, "fp": fingerprint(operation, request), "v": version}
                state.update(s=s_index, i=i_index)
                page.truncated = True
                page.continuation = {
                    "truncated": True,
                    "continuation_token": encode_token(state),
                    "exhausted": exhausted,
                }
                return page
            if over:
                page.warnings.append(
                    f"{name}[{i_index}] alone is {size} bytes, above max_text_bytes; returned whole"
                )
            page.sections[name].append(items[i_index])
            used[counter] += 1
            used["max_text_bytes"] += size
    return page
