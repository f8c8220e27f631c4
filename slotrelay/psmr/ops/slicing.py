"""Shared helpers of the operators: finding a target, walking relations, and rendering items.

Every list an operator returns is built here in a stable order (by distance, then identity), which is
what lets `budgets.paginate` resume exactly.
"""

from __future__ import annotations

import difflib
from collections import deque
from typing import Any

from slotrelay.psmr.errors import (
    ConflictRequiresReview,
    ObjectNotFound,
    TypeMismatch,
    UnresolvedRequiredInput,
)
from slotrelay.psmr.operators import INVERSE_RELATIONS
from slotrelay.psmr.workspace.identity import qname, sid
from slotrelay.psmr.workspace.store import Workspace

CODE_KINDS = frozenset({"module", "class", "function", "method", "lambda", "test"})


def find_node(ws: Workspace, value: str) -> str:
    """The node a target names (semantic identity or dotted name).

    Raises:
        ObjectNotFound: nothing by that name; the message offers close names.
    """
    node = sid(value.strip())
    if node in ws.nodes:
        return node
    names = [qname(n) for n in ws.nodes]
    close = difflib.get_close_matches(qname(node), names, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else "; find it with query.search"
    raise ObjectNotFound(f"{qname(node)} is not in workspace {ws.workspace_id}{hint}")


def analysable(ws: Workspace, node: str, *, accept_conflicts: bool = False) -> str:
    """A node that an analysis can start from: defined in the tree and not under an open conflict.

    Raises:
        UnresolvedRequiredInput: the node is an external or builtin reference.
        ConflictRequiresReview: the node has an open conflict and it was not accepted.
    """
    kind = ws.nodes[node]["kind"]
    if kind in ("external", "builtin"):
        raise UnresolvedRequiredInput(
            f"{qname(node)} is {kind}: only referenced from the tree, its code is not analysed; target "
            "the symbols that call it (query.subgraph with relations ['called_by'])"
        )
    conflicts = [c["id"] for c in ws.conflicts.values() if c["subject"] == node]
    if conflicts and not accept_conflicts:
        raise ConflictRequiresReview(
            f"{qname(node)} has open conflicts {', '.join(conflicts)} (see query.conflicts); repeat with "
            "accept_conflicts: true to analyse over every definition"
        )
    return node


def file_node(ws: Workspace, artifact: str) -> str:
    """The module node of a file path (as stored, relative to the root).

    Raises:
        ObjectNotFound: no such file in the workspace.
    """
    entry = ws.files.get(artifact.strip().lstrip("./"))
    if entry is None:
        raise ObjectNotFound(
            f"no file {artifact} in workspace {ws.workspace_id}; paths are relative to "
            f"{ws.root} (query.search with kind 'file' lists them)"
        )
    return sid(entry["module"])


def require_kind(ws: Workspace, node: str, kinds: set[str], operation: str) -> None:
    """Refuse a node of the wrong kind for an operation.

    Raises:
        TypeMismatch: the node's kind is not among `kinds`.
    """
    kind = ws.nodes[node]["kind"]
    if kind not in kinds:
        raise TypeMismatch(f"{operation} takes a {' or '.join(sorted(kinds))}; {qname(node)} is a {kind}")


# Inverse name -> the relation it walks backwards (`called_by` -> `calls`).
FORWARD: dict[str, str] = {inverse: name for name, inverse in INVERSE_RELATIONS.items()}
METHOD_KINDS = frozenset({"method", "function", "test"})
_OVERRIDES: dict[tuple[str, str], dict[str, list[str]]] = {}


def overrides(ws: Workspace) -> dict[str, list[str]]:
    """Method -> the base-class methods it overrides: for each method of a class, the first class after
    it in its MRO that defines the same name (computed once per workspace version in a process)."""
    key = (ws.workspace_id, ws.version)
    if key not in _OVERRIDES:
        nodes = ws.nodes
        found: dict[str, list[str]] = {}
        for cls, data in nodes.items():
            if data["kind"] != "class":
                continue
            for method in neighbours(ws, cls, "defines"):
                if nodes[method]["kind"] not in METHOD_KINDS:
                    continue
                name = qname(method).rsplit(".", 1)[-1]
                for base in data.get("mro", [])[1:]:
                    candidate = sid(f"{base}.{name}")
                    if candidate in nodes and nodes[candidate]["kind"] in METHOD_KINDS:
                        found[method] = [candidate]
                        break
        _OVERRIDES[key] = found
    return _OVERRIDES[key]


def neighbours(ws: Workspace, node: str, relation: str) -> list[str]:
    """Nodes one step along a relation; an inverse (`called_by`, `read_by`, ...) walks its relation
    backwards."""
    if relation == "overrides":
        return overrides(ws).get(node, [])
    if relation == "overridden_by":
        return sorted(m for m, bases in overrides(ws).items() if node in bases)
    if relation in FORWARD:
        return sorted({u for u, _, k in ws.edges_to(node) if k == FORWARD[relation]})
    return sorted({v for _, v, k in ws.edges_from(node) if k == relation})


def edges_among(ws: Workspace, members: set[str], relations: list[str]) -> list[dict[str, Any]]:
    """The edges between members of the relations followed (an inverse shows its edges forward),
    sorted by source, relation and target."""
    wanted = {FORWARD.get(r, r) for r in relations}
    items = [
        edge_item(ws, u, v, k)
        for member in members
        for u, v, k in ws.edges_from(member)
        if k in wanted and v in members
    ]
    if "overrides" in wanted:
        for method, bases in overrides(ws).items():
            if method in members:
                items += [override_item(ws, method, base) for base in bases if base in members]
    return sorted(items, key=lambda e: (e["source"], e["relation"], e["target"]))


def override_item(ws: Workspace, method: str, base: str) -> dict[str, Any]:
    """A derived `overrides` edge, resting on the two definitions and found along the MRO."""
    evidence = [*ws.nodes[method].get("evidence", []), *ws.nodes[base].get("evidence", [])]
    return {
        "source": method,
        "target": base,
        "relation": "overrides",
        "evidence_refs": evidence,
        "resolution": "self_mro",
        "status": "confirmed",
    }


def walk(ws: Workspace, start: str, relations: list[str], depth: int) -> dict[str, int]:
    """Breadth-first distances from start along the relations, up to depth."""
    distance = {start: 0}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if distance[node] >= depth:
            continue
        for relation in relations:
            for nxt in neighbours(ws, node, relation):
                if nxt not in distance:
                    distance[nxt] = distance[node] + 1
                    queue.append(nxt)
    return distance


def node_item(ws: Workspace, node: str, **extra: Any) -> dict[str, Any]:
    """A node as the API shows it."""
    return item_of_node(node, ws.nodes[node], **extra)


def item_of_node(node: str, data: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A node, given its data, as the API shows it."""
    item = {"id": node, "kind": data["kind"], "qualname": data["qualname"]}
    for key in ("artifact", "span", "signature", "subkind"):
        if data.get(key) is not None:
            item[key] = data[key]
    return item | extra


def edge_item(ws: Workspace, source: str, target: str, relation: str) -> dict[str, Any]:
    """An edge as the API shows it, with its evidence ids and how it was resolved."""
    data = ws.edges[source, target, relation]
    first = ws.evidence.get(data["evidence"][0], {})
    return {
        "source": source,
        "target": target,
        "relation": relation,
        "evidence_refs": list(data["evidence"]),
        "resolution": first.get("resolution"),
        "status": first.get("status"),
    }


def within(scope: str, nodes: set[str]) -> bool:
    """True if a scope identity is one of the nodes or nested in one of them."""
    if scope in nodes:
        return True
    name = qname(scope)
    return any(name.startswith(qname(n) + ".") for n in nodes)


def unknowns_in(ws: Workspace, nodes: set[str]) -> list[dict[str, Any]]:
    """The unknowns whose scope is one of the nodes, in a stable order."""
    return sorted(
        (u for u in ws.unknowns.values() if u["scope"] in nodes),
        key=lambda u: (u["artifact"], u["span"]["line"], u["span"]["col"], u["id"]),
    )


def conflicts_on(ws: Workspace, nodes: set[str]) -> list[dict[str, Any]]:
    """The conflicts whose subject is one of the nodes, by id."""
    return sorted((c for c in ws.conflicts.values() if c["subject"] in nodes), key=lambda c: c["id"])


def tests_reaching(ws: Workspace, node: str, *, depth: int = 6) -> list[dict[str, Any]]:
    """The test functions whose calls reach the node within depth, nearest first."""
    distance = walk(ws, node, ["called_by"], depth)
    tests = [(d, n) for n, d in distance.items() if ws.nodes[n]["kind"] == "test"]
    return [node_item(ws, n, distance=d) for d, n in sorted(tests)]
