"""The view's URLs, in one place: every page links to others through these."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

# The relations a symbol page follows unless told otherwise: all but `imports` (a module's imports
# would crowd out what it defines), which the relation boxes add.
SYMBOL_RELATIONS = (
    "defines",
    "calls",
    "called_by",
    "reads_state",
    "writes_state",
    "inherits",
    "decorates",
    "tests",
)


@dataclass(frozen=True)
class Links:
    """URLs of the pages about one workspace."""

    workspace_id: str

    @property
    def base(self) -> str:
        return f"/ws/{quote(self.workspace_id)}"

    def _page(self, name: str, query: Iterable[tuple[str, Any]]) -> str:
        kept = [(k, str(v)) for k, v in query if v not in (None, "")]
        return f"{self.base}/{name}" + (f"?{urlencode(kept)}" if kept else "")

    def overview(self) -> str:
        return f"{self.base}/"

    def search(self, text: str | None = None, kind: str | None = None) -> str:
        return self._page("search", [("q", text), ("kind", kind)])

    def _slice(self, name: str, identity: str, depth: int, relations: Iterable[str]) -> str:
        chosen = list(relations)
        rels = [] if chosen == list(SYMBOL_RELATIONS) else [("rel", r) for r in chosen]
        return self._page(name, [("id", identity), ("depth", depth if depth != 1 else None), *rels])

    def symbol(self, identity: str, depth: int = 1, relations: Iterable[str] = SYMBOL_RELATIONS) -> str:
        return self._slice("symbol", identity, depth, relations)

    def neighbours(self, identity: str, depth: int = 1, relations: Iterable[str] = SYMBOL_RELATIONS) -> str:
        """The list of a slice's nodes behind its picture."""
        return self._slice("neighbours", identity, depth, relations)

    def evidence(self, ids: Iterable[str], edge: dict[str, Any] | None = None) -> str:
        about = [("edge", f"{edge['source']} {edge['relation']} {edge['target']}")] if edge else []
        return self._page("evidence", [*(("id", i) for i in ids), *about])

    def impact(self, identity: str, *, accept_conflicts: bool = False) -> str:
        return self._page(
            "impact", [("id", identity), ("accept_conflicts", "1" if accept_conflicts else None)]
        )

    def unknowns(self, scope: str | None = None, reason: str | None = None) -> str:
        return self._page("unknowns", [("scope", scope), ("reason", reason)])

    def conflicts(self, subject: str | None = None) -> str:
        return self._page("conflicts", [("subject", subject)])

    def findings(self, kind: str | None = None) -> str:
        return self._page("findings", [("kind", kind)])

    def diff(
        self, *, against: str | None = None, workspace_a: str | None = None, workspace_b: str | None = None
    ) -> str:
        pair = [("workspace_a", workspace_a), ("workspace_b", workspace_b)]
        return self._page("diff", [("against", against), *pair])

    def deltas(self) -> str:
        return self._page("deltas", [])

    def delta(self, delta_id: str) -> str:
        return self._page("delta", [("id", delta_id)])

    def source(self, artifact: str, line: int, context: int | None = None) -> str:
        return self._page("source", [("artifact", artifact), ("line", line), ("context", context)])
