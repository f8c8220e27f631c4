"""Budgets and continuation (CONTRACTS.md#budgets): cut a result into pages without ever truncating silently.

An operator lays its result out as ordered sections of items (nodes, edges, evidence, unknowns, ...),
each already in a stable order, and may rank each item by its distance from what was asked about
(the anchor of a slice, the target of an impact). `paginate` reads the items nearest-first across the
sections: every item of rank 0 in section order, then every item of rank 1, and so on, so a page
holds the anchor's direct edges, their nodes and the unknowns about them before anything further
away. It stops at the first item that would pass a budget. The continuation token records the
position in that order together with a fingerprint of the request and the workspace version, so
resuming yields exactly the next items, and a token used on another request or a changed workspace
is refused instead of giving a mixed answer. Each page says, per section, how many items there are
in all, where the page starts and how many remain.

Invariants: pages concatenated in order, section by section, equal the untruncated result (each
section's ranks never decrease, so reading nearest-first keeps every section in its own order); the
text budget covers the whole answer as sent (`handlers` re-cuts a page whose envelope is too large).
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from slotrelay.psmr.errors import InvalidQuery, PolicyBlocked
from slotrelay.psmr.operators import DEFAULT_BUDGET

# Past these a request is a dump of the graph in disguise (CONTRACTS.md#no-dumps): use the export command.
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
    """One page of a result: the sections' items that fit, where each section stands, and the
    continuation if any."""

    sections: dict[str, list[Any]]
    paging: dict[str, dict[str, int]] = field(default_factory=dict)
    truncated: bool = False
    continuation: dict[str, Any] | None = None

    @property
    def returned(self) -> int:
        """How many items the page holds, over all sections."""
        return sum(map(len, self.sections.values()))


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
                f"budget.{name}={budget[name]} is above {ceiling}: PSMR does not dump whole graphs"
                "; page with continuation_token, narrow the query, or export with "
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


def decode_token(token: str, *, operation: str, request: dict[str, Any], version: str) -> int:
    """The position in nearest-first order a token resumes from.

    Parameters:
        token: the continuation token from a truncated result.
        operation: the operation now called.
        request: the request now made.
        version: the workspace version now stored.

    Returns:
        How many items of the nearest-first order earlier pages held.

    Raises:
        InvalidQuery: the token is malformed, belongs to another query, or the workspace changed.
    """
    try:
        state = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        position = int(state["p"])
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
    return position


def reading_order(
    sections: list[tuple[str, list[Any]]], ranks: dict[str, list[int]]
) -> list[tuple[int, int]]:
    """Every item as (section index, item index), nearest-first across the sections.

    Parameters:
        sections: (name, items) pairs, each list in a stable order.
        ranks: per section name, each item's distance (sections not named are all rank 0).

    Returns:
        The order pages are read in.

    Raises:
        ValueError: a section whose ranks decrease (its pages would not concatenate to it).
    """
    keyed = []
    for s_index, (name, items) in enumerate(sections):
        section_ranks = ranks.get(name) or [0] * len(items)
        if len(section_ranks) != len(items) or any(a > b for a, b in pairwise(section_ranks)):
            raise ValueError(f"section {name!r} is not laid out nearest-first")
        keyed += [(rank, s_index, i_index) for i_index, rank in enumerate(section_ranks)]
    keyed.sort()
    return [(s_index, i_index) for _, s_index, i_index in keyed]


@dataclass
class Layout:
    """An answer's sections in reading order, each item's size measured once however often it is cut.

    Parameters:
        sections: (name, items) pairs, each list in a stable order.
        ranks: per section name, each item's distance from the anchor (non-decreasing); a section
            not named is all rank 0, so unranked sections are read one after another.
    """

    sections: list[tuple[str, list[Any]]]
    ranks: dict[str, list[int]] = field(default_factory=dict)
    order: list[tuple[int, int]] = field(init=False)
    _sizes: dict[tuple[int, int], int] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.order = reading_order(self.sections, self.ranks)

    def size(self, s_index: int, i_index: int) -> int:
        """The bytes an item adds to the answer: its JSON and the separator before it."""
        key = (s_index, i_index)
        if key not in self._sizes:
            item = self.sections[s_index][1][i_index]
            self._sizes[key] = len(json.dumps(item, default=str, ensure_ascii=False).encode()) + 2
        return self._sizes[key]


def paginate(
    layout: Layout,
    *,
    operation: str,
    request: dict[str, Any],
    version: str,
    text_allowance: int | None = None,
) -> Page:
    """Cut a laid-out answer to the request's budget, nearest-first, resuming from its token if any.

    Parameters:
        layout: the answer's sections in reading order.
        operation: the operation answering (bound into the token).
        request: the request (its budget and continuation_token are read).
        version: the workspace version (bound into the token).
        text_allowance: bytes the items may take (default `max_text_bytes`); the caller lowers it by
            what the rest of the answer takes. The first item of a page is always taken.

    Returns:
        The page; `truncated` and a continuation when items remain.

    Raises:
        PolicyBlocked: a budget above the hard ceiling.
        InvalidQuery: a continuation token that does not fit this query.
    """
    budget = effective_budget(request)
    allowance = budget["max_text_bytes"] if text_allowance is None else text_allowance
    sections, order = layout.sections, layout.order
    start = 0
    token = request.get("continuation_token")
    if token:
        start = decode_token(token, operation=operation, request=request, version=version)
    used = dict.fromkeys(DEFAULT_BUDGET, 0)
    page = Page(sections={name: [] for name, _ in sections})
    offsets = [0] * len(sections)
    for s_index, _ in order[:start]:
        offsets[s_index] += 1
    for position in range(start, len(order)):
        s_index, i_index = order[position]
        name, items = sections[s_index]
        counter = SECTION_COUNTER.get(name, "max_nodes")
        size = layout.size(s_index, i_index)
        over = used[counter] + 1 > budget[counter] or used["max_text_bytes"] + size > allowance
        if over and position > start:
            exhausted = counter if used[counter] + 1 > budget[counter] else "max_text_bytes"
            state = {"op": operation, "fp": fingerprint(operation, request), "v": version, "p": position}
            page.truncated = True
            page.continuation = {
                "truncated": True,
                "continuation_token": encode_token(state),
                "exhausted": exhausted,
            }
            break
        page.sections[name].append(items[i_index])
        used[counter] += 1
        used["max_text_bytes"] += size
    for s_index, (name, items) in enumerate(sections):
        returned = len(page.sections[name])
        page.paging[name] = {
            "total": len(items),
            "offset": offsets[s_index],
            "remaining": len(items) - offsets[s_index] - returned,
        }
    return page
