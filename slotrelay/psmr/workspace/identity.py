"""Semantic identities: how a node of the workspace graph is named (`semantic:pkg.mod.func`), and the
stable ids of the records beside the graph (evidence, unknowns, conflicts, findings).

A module of its own, apart from the assembler (`slotrelay.psmr.workspace.graph`), so that what only reads a
stored workspace (the queries, the MCP server's first answer) names nodes without importing the
fast pass and the resolver.
"""

from __future__ import annotations

import hashlib
from typing import Any

PREFIX = "semantic:"


def sid(qualname: str) -> str:
    """The semantic identity of a qualified name."""
    return qualname if qualname.startswith(PREFIX) else PREFIX + qualname


def qname(identity: str) -> str:
    """The qualified name of a semantic identity (or of a bare dotted name)."""
    return identity.removeprefix(PREFIX)


def stable_id(prefix: str, *parts: Any) -> str:
    """`prefix_` and 12 hex digits of a digest of the parts."""
    return f"{prefix}_{hashlib.sha1(repr(parts).encode()).hexdigest()[:12]}"
