"""One module's part of the workspace graph, and the graph the parts make together.

The assembler (`slotrelay.psmr.workspace.graph`) turns each module's facts and its share of the resolution
into a `ModulePart`: the nodes the module defines, the edges it makes, and its evidence, unknowns and
conflicts. What a part would need of the others (is a state access's target a node, is a test's
callee code of the tree, is an imported name a node or outside the tree) is settled when the parts
are merged (`merge`). So an update assembles again only the modules whose facts or resolution
changed, the store keeps each part as a record of its own and writes only the parts that changed,
and the same parts merge into the same graph whichever build made them.

A stored part (`to_payload`) is three JSON documents on three lines: the nodes it defines (nodes, refs),
its edges (edges, state, imports), then its details (evidence, unknowns, conflicts). A workspace read
from the store parses the nodes when it is loaded, and merges the edges and parses the details only
when a call first asks for them (`Content`): a search answers from the nodes alone, without two thirds
of the bytes and without the merge. All three lines are under the record's one seal, checked when the
record is read.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from slotrelay.psmr.errors import ValidationFailed

EdgeKey = tuple[str, str, str]
NODE_FIELDS = ("nodes", "refs")
EDGE_FIELDS = ("edges", "state", "imports")
DETAIL_FIELDS = ("evidence", "unknowns", "conflicts")
# The rows of a stored graph: a node (identity, data); an edge or a state access (source, target,
# relation, data); an import (importer, imported, qualname, evidence id).
NODE_ROW = (str, dict)
EDGE_ROW = (str, str, str, dict)
IMPORT_ROW = (str, str, str, str)
# Evidence, unknowns and conflicts, each by id.
Records = tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], dict[str, dict[str, Any]]]
# Kinds of nodes that are not code of the tree: a test's call to one is not what it tests.
OUTSIDE_KINDS = frozenset({"external", "builtin"})


@dataclass
class ModulePart:
    """What one module adds to the workspace graph."""

    # The nodes the module defines (itself, its definitions, its state), in the order it defines them.
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Nodes outside the tree its calls and bases name (external, builtin): one per name in the graph.
    refs: dict[str, dict[str, Any]] = field(default_factory=dict)
    # (source, target, relation) -> {"relation", "evidence": [evidence ids]}
    edges: dict[EdgeKey, dict[str, Any]] = field(default_factory=dict)
    # State accesses (scope, target, relation, evidence record): an edge when the target is a node.
    state: list[tuple[str, str, str, dict[str, Any]]] = field(default_factory=list)
    # Imports (importer, imported, its qualname, evidence id): an imported name that is no node is made
    # an external one.
    imports: list[tuple[str, str, str, str]] = field(default_factory=list)
    evidence: dict[str, dict[str, Any]] = field(default_factory=dict)
    unknowns: dict[str, dict[str, Any]] = field(default_factory=dict)
    conflicts: dict[str, dict[str, Any]] = field(default_factory=dict)

    @functools.cached_property
    def loose(self) -> tuple[list[EdgeKey], list[str]]:
        """What the merge settles of this part (once the part is complete): its calls from its tests,
        and the names its edges start or end at that it holds no node of, in order."""
        tests = [
            key
            for key in self.edges
            if key[2] == "calls" and self.nodes.get(key[0], {}).get("kind") == "test"
        ]
        ends = [end for source, target, _ in self.edges for end in (source, target)]
        ends += [scope for scope, *_ in self.state] + [importer for importer, *_ in self.imports]
        return tests, [end for end in dict.fromkeys(ends) if end not in self.nodes and end not in self.refs]

    def to_payload(self) -> bytes:
        """The part as stored: its nodes, its edges and its details, one line each (`StoredPart.read`
        reads it back).

        orjson writes a document on one line (a newline inside a string is escaped), so the lines
        are the documents.
        """
        nodes = {"nodes": list(self.nodes.items()), "refs": list(self.refs.items())}
        edges = {
            "edges": [[*key, data] for key, data in self.edges.items()],
            "state": self.state,
            "imports": self.imports,
        }
        details = {"evidence": self.evidence, "unknowns": self.unknowns, "conflicts": self.conflicts}
        return b"\n".join(orjson.dumps(document) for document in (nodes, edges, details))


@dataclass
class StoredPart:
    """A part read back from the store: its nodes parsed, its edges and details still bytes."""

    nodes: dict[str, dict[str, Any]]
    refs: dict[str, dict[str, Any]]
    edges: bytes
    details: bytes

    @classmethod
    def read(cls, payload: bytes) -> StoredPart | None:
        """The part a stored payload holds, or None when it is not three lines or its nodes' shape or
        types are wrong."""
        lines = payload.split(b"\n")
        if len(lines) != 3:
            return None
        document = _loads(lines[0])
        if not (
            isinstance(document, dict)
            and all(isinstance(document.get(name), list) for name in NODE_FIELDS)
            and all(_typed(item, NODE_ROW) for name in NODE_FIELDS for item in document[name])
        ):
            return None
        return cls(dict(document["nodes"]), dict(document["refs"]), lines[1], lines[2])

    def part(self) -> ModulePart:
        """The part with its edges (without its details).

        Raises:
            ValidationFailed: the edges' shape or types are wrong.
        """
        document = _loads(self.edges)
        if not (
            isinstance(document, dict)
            and all(isinstance(document.get(name), list) for name in EDGE_FIELDS)
            and all(
                _typed(item, EDGE_ROW) and isinstance(item[3].get("evidence"), list)
                for item in document["edges"]
            )
            and all(_typed(item, EDGE_ROW) and type(item[3].get("id")) is str for item in document["state"])
            and all(_typed(item, IMPORT_ROW) for item in document["imports"])
        ):
            raise ValidationFailed(
                "a stored part of the workspace's graph holds no edges of the expected shape; "
                "rebuild with `slotrelay psmr build`"
            )
        return ModulePart(
            nodes=self.nodes,
            refs=self.refs,
            edges={(u, v, k): data for u, v, k, data in document["edges"]},
            state=[tuple(item) for item in document["state"]],
            imports=[tuple(item) for item in document["imports"]],
        )


def _loads(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return None


def _typed(item: Any, types: tuple[type, ...]) -> bool:
    """A list whose items have exactly these types (compared in C: a load checks tens of thousands)."""
    return type(item) is list and tuple(map(type, item)) == types


class Content:
    """A workspace's graph and records: an assembly at hand, or stored parts read on first use.

    Read from the store, the nodes the parts define are merged at once (`defined_nodes`, what a
    search needs); the parts' edges are parsed and merged on the first use of `nodes` or `edges` (the
    merge settles the nodes no part defines: imported names, loose ends), their details on the first
    use of the records.

    Parameters:
        assembly: the merged graph, when it is at hand (a build's).
        stored: the parts read from the store, in the merge's order.
    """

    def __init__(self, assembly: Assembly | None = None, *, stored: tuple[StoredPart, ...] = ()) -> None:
        self._assembly = assembly
        self._records: Records | None = None
        if assembly is not None:
            self._records = (assembly.evidence, assembly.unknowns, assembly.conflicts)
        self._stored = stored
        self._defined: dict[str, dict[str, Any]] | None = None
        # Calls share a loaded workspace across threads: one parses, the others wait for it.
        self._lock = threading.Lock()

    def defined_nodes(self) -> dict[str, dict[str, Any]]:
        """The nodes the parts define and the outside nodes they name (external, builtin), as the merge
        gives them: before the merge, without the nodes it adds for imported names and loose ends
        (none of a kind a search looks for); once merged, every node."""
        if self._assembly is not None:
            return self._assembly.nodes
        with self._lock:
            if self._defined is None:
                nodes: dict[str, dict[str, Any]] = {}
                for part in self._stored:
                    _add_nodes(nodes, part.nodes)
                for part in self._stored:
                    for node, data in part.refs.items():
                        nodes.setdefault(node, data)
                self._defined = nodes
            return self._defined

    def assembly(self) -> Assembly:
        """The merged graph (its evidence only the merge's own, of state accesses, until `records`).

        Raises:
            ValidationFailed: a stored part's edges are not of the expected shape.
        """
        if self._assembly is None:
            with self._lock:
                if self._assembly is None:
                    self._assembly = merge(part.part() for part in self._stored)
        return self._assembly

    def records(self) -> Records:
        """Evidence, unknowns and conflicts, by id.

        Raises:
            ValidationFailed: a stored part's edges or details are not of the expected shape (the part
                was sealed by this user's slotrelay, so only a fault of the writer makes one).
        """
        if self._records is None:
            merged = self.assembly().evidence
            with self._lock:
                if self._records is None:
                    self._records = _parse_details(tuple(part.details for part in self._stored), merged)
                    # Everything is parsed: the stored bytes would only double the workspace's memory.
                    self._stored = ()
        return self._records


def _parse_details(pending: tuple[bytes, ...], merged: dict[str, dict[str, Any]]) -> Records:
    """The parts' details, in order, then the merge's own evidence (of state accesses)."""
    evidence: dict[str, dict[str, Any]] = {}
    unknowns: dict[str, dict[str, Any]] = {}
    conflicts: dict[str, dict[str, Any]] = {}
    for payload in pending:
        document = _loads(payload)
        if not (isinstance(document, dict) and all(type(document.get(n)) is dict for n in DETAIL_FIELDS)):
            raise ValidationFailed(
                "a stored part of the workspace's graph holds no evidence, unknowns and conflicts; "
                "rebuild with `slotrelay psmr build`"
            )
        evidence.update(document["evidence"])
        unknowns.update(document["unknowns"])
        conflicts.update(document["conflicts"])
    evidence.update(merged)
    return evidence, unknowns, conflicts


@dataclass
class Assembly:
    """The workspace graph's nodes and edges, with its evidence, unknown and conflict records."""

    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    edges: dict[EdgeKey, dict[str, Any]] = field(default_factory=dict)
    evidence: dict[str, dict[str, Any]] = field(default_factory=dict)
    unknowns: dict[str, dict[str, Any]] = field(default_factory=dict)
    conflicts: dict[str, dict[str, Any]] = field(default_factory=dict)


def merge(parts: Iterable[ModulePart]) -> Assembly:
    """The graph the parts make, in their order: the first part to define a node gives its data."""
    parts = list(parts)
    out = Assembly()
    nodes, edges = out.nodes, out.edges
    for part in parts:
        _add_nodes(nodes, part.nodes)
    for part in parts:
        for node, data in part.refs.items():
            nodes.setdefault(node, data)
    for part in parts:
        shared = edges.keys() & part.edges.keys()
        if not shared:
            edges.update(part.edges)
        else:
            for key, data in part.edges.items():
                _add_edge(edges, key, data["evidence"])
        out.evidence.update(part.evidence)
        out.unknowns.update(part.unknowns)
        out.conflicts.update(part.conflicts)
    for part in parts:
        for scope, target, relation, record in part.state:
            if target in nodes:
                out.evidence[record["id"]] = record
                _add_edge(edges, (scope, target, relation), [record["id"]])
    for part in parts:
        for importer, imported, qualname, ev in part.imports:
            if imported not in nodes:
                nodes[imported] = {"kind": "external", "qualname": qualname}
            _add_edge(edges, (importer, imported, "imports"), [ev])
    # A test tests the code of the tree it calls (its first piece of evidence says where).
    for part in parts:
        for test, target, _ in part.loose[0]:
            if nodes[test].get("kind") == "test" and nodes.get(target, {}).get("kind") not in OUTSIDE_KINDS:
                _add_edge(edges, (test, target, "tests"), edges[test, target, "calls"]["evidence"][:1])
    # An edge to a name no part defines (networkx would add it bare) keeps a node of its own.
    for part in parts:
        for end in part.loose[1]:
            if end not in nodes:
                nodes[end] = {}
    return out


def _add_nodes(nodes: dict[str, dict[str, Any]], more: dict[str, dict[str, Any]]) -> None:
    if nodes.keys() & more.keys():
        for node, data in more.items():
            nodes.setdefault(node, data)
    else:
        nodes.update(more)


def _add_edge(edges: dict[EdgeKey, dict[str, Any]], key: EdgeKey, evidence: list[str]) -> None:
    """Add an edge, or its evidence to the edge already there (without changing a part's own lists)."""
    data = edges.get(key)
    if data is None:
        edges[key] = {"relation": key[2], "evidence": list(evidence)}
        return
    new = [ev for ev in evidence if ev not in data["evidence"]]
    if new:
        edges[key] = {**data, "evidence": data["evidence"] + new}
