"""Pages of a budgeted answer as links: the API's continuation token is the cursor, the page number a label.

A page link carries `page` (its ordinal), `token` (the continuation token of the answer before it)
and `v` (the workspace version the token was issued for). Page 1 has neither token nor version.
The view never counts items itself: how much a page holds is the operator's budget, and where the
next page starts is the operator's token, so the pages concatenated are exactly the API's answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.datastructures import QueryParams

from psmr_view.errors import ViewError
from psmr_view.graph_svg import MAX_DRAWN

# Per page, in the API's budget terms. Slices and impact share `max_nodes` between their node-like
# sections (nodes, contracts, unknowns, conflicts), as the API counts them.
BUDGETS: dict[str, dict[str, int]] = {
    "search": {"max_nodes": 50},
    "symbol": {"max_nodes": 120, "max_edges": 200, "max_text_bytes": 150_000},
    # A slice's picture and its list of neighbours: pages of nodes. Nearest-first, the edges among
    # nearer nodes come before a node, so these pages take edges freely and stop at their nodes.
    "picture": {"max_nodes": MAX_DRAWN, "max_edges": 5_000, "max_text_bytes": 1_000_000},
    "neighbours": {"max_nodes": 100, "max_edges": 15_000, "max_text_bytes": 2_000_000},
    "touching": {"max_nodes": 20},
    "evidence": {"max_evidence_items": 20},
    # The records a page reads to tell a raise from a call, or an overload stub from a definition.
    "sites": {"max_evidence_items": 500, "max_text_bytes": 500_000},
    "impact": {"max_nodes": 120},
    "unknowns": {"max_nodes": 100},
    "conflicts": {"max_nodes": 100},
    "findings": {"max_nodes": 100},
    "diff": {"max_nodes": 150, "max_edges": 150},
    "deltas": {"max_nodes": 50},
    # A delta's sections (edits, sites, contracts, one diff per file) share max_nodes; its diffs are
    # the bulk of its text.
    "delta": {"max_nodes": 100, "max_text_bytes": 300_000},
}


@dataclass(frozen=True)
class PageRef:
    """Which page of an answer a request asks for."""

    number: int = 1
    token: str | None = None
    version: str | None = None

    @classmethod
    def parse(cls, params: QueryParams) -> PageRef:
        """The page named by a request's `page`, `token` and `v` parameters.

        Raises:
            ViewError: INVALID_QUERY for a page that is not a whole number from 1, or a page past
                the first without its token (or a token on page 1).
        """
        text = params.get("page", "1")
        if not (text.isascii() and text.isdigit()) or int(text) < 1:
            raise ViewError(
                "INVALID_QUERY", f"page must be a whole number from 1, got {text!r}; start from page 1"
            )
        number, token = int(text), params.get("token") or None
        if (number > 1) != (token is not None):
            raise ViewError(
                "INVALID_QUERY",
                f"page {number} {'needs the continuation token' if number > 1 else 'takes no token'}: "
                "follow the page links, which carry it, or start from page 1",
            )
        return cls(number, token, params.get("v"))

    def check_version(self, version: str, first_page: str) -> None:
        """Refuse a token issued for another version of the workspace.

        Raises:
            ViewError: WORKSPACE_REBUILT (409) when the workspace changed since the link was made.
        """
        if self.token is not None and self.version != version:
            raise ViewError(
                "WORKSPACE_REBUILT",
                f"the workspace was rebuilt (version {self.version} is now {version}) since this page "
                "link was made; its continuation token no longer fits",
                status=409,
                links=[("start again from page 1", first_page)],
            )


@dataclass(frozen=True)
class Pager:
    """The links around one page of an answer."""

    number: int
    truncated: bool
    exhausted: str | None
    next_url: str | None
    first_url: str


def first_page_url(path: str, params: QueryParams) -> str:
    """The URL of page 1 of the answer shown at `path` with `params` (paging members dropped)."""
    kept = [(k, v) for k, v in params.multi_items() if k not in ("page", "token", "v")]
    return f"{path}?{urlencode(kept)}" if kept else path


def pager(path: str, params: QueryParams, page: PageRef, answer: dict[str, Any], version: str) -> Pager:
    """The pager of an answer on the page at `path` with `params`.

    Parameters:
        path: the page's path.
        params: its query parameters (kept on every link, paging members replaced).
        page: the page shown.
        answer: the operator's envelope (its `continuation` gives the next token).
        version: the workspace version the answer was read from.

    Returns:
        The pager, with the next page's URL when the answer was truncated.
    """
    kept = [(k, v) for k, v in params.multi_items() if k not in ("page", "token", "v")]
    continuation = answer.get("continuation")
    next_url = None
    if continuation:
        query = [*kept, ("page", str(page.number + 1)), ("token", continuation["continuation_token"])]
        next_url = f"{path}?{urlencode([*query, ('v', version)])}"
    return Pager(
        number=page.number,
        truncated=bool(continuation),
        exhausted=continuation["exhausted"] if continuation else None,
        next_url=next_url,
        first_url=first_page_url(path, params),
    )
