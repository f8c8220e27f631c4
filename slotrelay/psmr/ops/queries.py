"""The discovery and query operators: workspace.describe, operator.list/describe, query.search,
query.subgraph, query.evidence, query.unknowns, query.conflicts.

Each returns an `Answer`: ordered sections of items (paged by the caller to the budget) and the
unpaged summary members of `data`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from slotrelay.psmr.analysis.effects import classify
from slotrelay.psmr.errors import (
    InvalidQuery,
    ObjectNotFound,
    OperatorUnavailable,
    PolicyBlocked,
    UnsupportedProjection,
)
from slotrelay.psmr.operators import DEFAULT_RELATIONS, FINDING_KINDS, OPERATIONS
from slotrelay.psmr.ops.externals import import_origin
from slotrelay.psmr.ops.slicing import (
    CODE_KINDS,
    conflicts_on,
    edges_among,
    file_node,
    find_node,
    item_of_node,
    node_item,
    unknowns_in,
    walk,
    within,
)
from slotrelay.psmr.workspace.identity import qname
from slotrelay.psmr.workspace.store import Workspace

MAX_DEPTH = 10


@dataclass
class Answer:
    """An operator's result before paging."""

    sections: list[tuple[str, list[Any]]] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    evidence_refs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # What a continuation token is bound to when no single workspace answers (semantic diff).
    version: str | None = None
    # Per section, each item's distance from the anchor: pages are read nearest-first across sections.
    ranks: dict[str, list[int]] = field(default_factory=dict)

    def add(self, name: str, items: list[Any], rank: Callable[[Any], int] | None = None) -> None:
        """Append a section; with `rank`, its items nearest-first (their order kept within a rank)."""
        if rank is not None:
            items = sorted(items, key=rank)
            self.ranks[name] = [rank(item) for item in items]
        self.sections.append((name, items))


def describe_workspace(ws: Workspace, request: dict[str, Any], *, recorded: list[dict[str, Any]]) -> Answer:
    """workspace.describe: what the workspace holds (`recorded`: the passes' recorded disagreements)."""
    kinds = Counter(d["kind"] for d in ws.nodes.values())
    relations = Counter(k for _, _, k in ws.edges)
    origins = Counter(import_origin(u) for u in ws.unknowns.values())
    imports = {"stdlib": origins["stdlib"], "installed": origins["installed"]}
    return Answer(
        data={
            "workspace_id": ws.workspace_id,
            "root": ws.root,
            "rev": ws.rev,
            "commit": ws.commit,
            "version": ws.version,
            "updated": ws.updated,
            "files": len(ws.files),
            "artifact_types": ["source_file", "git_revision"],
            "graph_types": ["cisg", "state", "motif"],
            "contract_types": ["test", "signature", "docstring", "assertion", "raises"],
            "available_operators": sorted(OPERATIONS),
            "capability_summary": {
                "read": True,
                "source_write": False,
                "process_execution": False,
                "inference": "jedi, on demand (query.subgraph infer: true)",
                "checker": "pyflakes",
                "api_diff": "griffe",
                "import_graph": "grimp",
            },
            "node_counts": dict(sorted(kinds.items())),
            "edge_counts": dict(sorted(relations.items())),
            "unknown_count": len(ws.unknowns) - sum(imports.values()),
            "external_imports": imports,
            "conflict_count": len(ws.conflicts) + len(recorded),
            "warnings": ws.warnings,
        }
    )


def list_operators(request: dict[str, Any]) -> Answer:
    """operator.list: the operators, optionally only those taking an input type."""
    wanted = (request.get("filter") or {}).get("input_type")
    items = [
        {"operator": name, "description": op["description"], "input_types": op["input_types"]}
        for name, op in sorted(OPERATIONS.items())
        if wanted is None or wanted in op["input_types"]
    ]
    return Answer(sections=[("operators", items)])


def describe_operator(request: dict[str, Any]) -> Answer:
    """operator.describe: one operator's contract."""
    name = request["operator"]
    if name not in OPERATIONS:
        raise OperatorUnavailable(
            f"no operator named {name!r}; operator.list shows the {len(OPERATIONS)} offered"
        )
    return Answer(data={"operator": name, **OPERATIONS[name]})


def search(
    ws: Workspace,
    request: dict[str, Any],
    *,
    motifs: Callable[[], list[dict[str, Any]]],
    findings: Callable[[], dict[str, list[dict[str, Any]]]],
) -> Answer:
    """query.search: semantic identities matching a text, of one kind.

    Parameters:
        ws: the workspace.
        request: the request (`text`, optional `kind`, default `symbol`).
        motifs: gives every motif instance (computed only for kind `motif`).
        findings: gives the findings by kind (computed only for kind `finding`).

    Returns:
        One section, `matches`, each with its semantic identity in `id`.
    """
    text = request["text"].lower()
    kind = request.get("kind", "symbol")
    # Code and state are nodes the modules define: found without merging the graph's edges.
    nodes = ws.defined_nodes
    items: list[dict[str, Any]] = []
    if kind in ("symbol", "state"):
        wanted = CODE_KINDS if kind == "symbol" else {"state"}
        hits = [n for n, d in nodes.items() if d["kind"] in wanted and text in d["qualname"].lower()]
        hits.sort(key=lambda n: (not qname(n).lower().endswith(text), len(n), n))
        items = [item_of_node(n, nodes[n]) for n in hits]
    elif kind in ("file", "artifact"):
        for path, entry in sorted(ws.files.items()):
            if text in path.lower():
                ident = f"artifact:{path}" + (f"@{ws.commit}" if kind == "artifact" and ws.commit else "")
                items.append(
                    {
                        "id": ident,
                        "artifact": path,
                        "module": f"semantic:{entry['module']}",
                        "sha256": entry["sha256"],
                        "revision": ws.commit,
                    }
                )
    elif kind in ("effect", "boundary"):
        items = _effects(ws, text, boundary=kind == "boundary")
    elif kind == "motif":
        items = [m for m in motifs() if text in m["id"].lower()]
    elif kind == "finding":
        found = findings()
        items = [
            f
            for group in FINDING_KINDS
            for f in found[group]
            if text in (f["message"] + f["subject"]).lower()
        ]
    elif kind == "contract":
        hits = [
            n
            for n, d in nodes.items()
            if d["kind"] in CODE_KINDS - {"module"}
            and (d.get("asserts") or d.get("raises") or d.get("doc"))
            and text in d["qualname"].lower()
        ]
        items = [
            item_of_node(
                n,
                nodes[n],
                has_asserts=bool(nodes[n].get("asserts")),
                raises=nodes[n].get("raises", []),
            )
            for n in sorted(hits)
        ]
    return Answer(sections=[("matches", items)], data={"kind": kind, "total": len(items)})


def _effects(ws: Workspace, text: str, *, boundary: bool) -> list[dict[str, Any]]:
    by_target: dict[str, list[str]] = {}
    for source, target, key in ws.edges:
        if (
            key == "calls"
            and ws.nodes[target]["kind"] in ("external", "builtin")
            and classify(qname(target))
        ):
            by_target.setdefault(target, []).append(source)
    if not boundary:
        return [
            {"id": t, "effect": classify(qname(t)), "callers": sorted(set(c))}
            for t, c in sorted(by_target.items())
            if text in t.lower()
        ]
    by_caller: dict[str, set[str]] = {}
    for target, callers in by_target.items():
        for caller in callers:
            by_caller.setdefault(caller, set()).add(target)
    return [
        node_item(ws, c, effects=sorted({classify(qname(t)) for t in ts}), crosses=sorted(ts))
        for c, ts in sorted(by_caller.items())
        if text in c.lower()
    ]


def subgraph(ws: Workspace, request: dict[str, Any], *, infer: Any, recorded: list[dict[str, Any]]) -> Answer:
    """query.subgraph: the semantic slice S = (N, E, K, U, C, P) around an anchor.

    `infer(ws, distance)` runs the slow pass over the slice (when the request says `infer: true`);
    `recorded` are the passes' disagreements recorded earlier, shown when they touch the slice.
    """
    depth = _slice_depth(request)
    projection = _slice_projection(request)
    start = _anchor_node(ws, request["anchor"])
    relations = request.get("relations") or DEFAULT_RELATIONS
    answer = Answer()
    distance = walk(ws, start, relations, depth)
    inferred = infer(ws, distance) if request.get("infer") else None
    overlay = inferred.edges if inferred else []
    if inferred:
        answer.warnings += inferred.warnings
    nodes = sorted(distance, key=lambda n: (distance[n], n))
    members = set(nodes)
    edges = edges_among(ws, members, relations)
    edges += sorted(
        (e for e in overlay if e["source"] in members),
        key=lambda e: (e["source"], e["relation"], e["target"]),
    )
    for extra in {e["target"] for e in overlay} - members:
        nodes.append(extra)
        distance[extra] = depth + 1
    if projection == "callgraph":
        edges = [e for e in edges if e["relation"] == "calls"]
    resolved = {u["id"] for e in overlay for u in e.get("resolves", [])}
    unknowns = [u for u in unknowns_in(ws, members) if u["id"] not in resolved]
    # Disagreements met now or recorded by an earlier inference query, each once.
    disagreements = {c["id"]: c for c in recorded if c["subject"] in members}
    disagreements |= {c["id"]: c for c in (inferred.conflicts if inferred else [])}

    def away(node: str) -> int:
        return distance.get(node, depth + 1)

    def edge_rank(edge: dict[str, Any]) -> int:
        return max(away(edge["source"]), away(edge["target"]))

    # Nearest-first: the anchor and what is about it, then each ring's edges, nodes, unknowns, ...
    answer.add("edges", edges, edge_rank)
    answer.add("nodes", _slice_node_items(ws, nodes, distance), lambda n: n["distance"])
    answer.add("unknowns", unknowns, lambda u: away(u["scope"]))
    answer.add("contracts", _slice_contracts(ws, nodes), lambda c: away(c["subject"]))
    answer.add(
        "conflicts",
        conflicts_on(ws, members) + sorted(disagreements.values(), key=lambda c: c["id"]),
        lambda c: away(c["subject"]),
    )
    if request.get("include_evidence"):
        records = {**ws.evidence, **(inferred.evidence if inferred else {})}
        cited = _cited_evidence(edges, edge_rank, depth)
        answer.add("evidence", [records[i] for i in sorted(cited) if i in records], lambda r: cited[r["id"]])
    answer.data = {
        "anchor": start,
        "depth": depth,
        "relations": relations,
        "projection": projection,
        "provenance": {
            "workspace_id": ws.workspace_id,
            "version": ws.version,
            "revision": ws.commit,
            "passes": ["ast"] + (["jedi"] if request.get("infer") else []),
            "resolved_by_inference": sorted(resolved),
        },
    }
    return answer


def _slice_depth(request: dict[str, Any]) -> int:
    depth: int = request.get("depth", 2)
    if depth > MAX_DEPTH:
        raise PolicyBlocked(
            f"depth {depth} is above {MAX_DEPTH}: deep slices approach a dump of the graph"
            "; slice less deeply and follow up from the frontier"
        )
    return depth


def _slice_projection(request: dict[str, Any]) -> str:
    projection: str = request.get("projection", "graph")
    if projection not in ("graph", "callgraph"):
        raise UnsupportedProjection(
            f"query.subgraph projects to 'graph' or 'callgraph', not {projection!r}; "
            "patches and sources belong to projection.preview (not in this runtime)"
        )
    return projection


def _anchor_node(ws: Workspace, anchor: dict[str, Any]) -> str:
    """The node a slice starts from: a file's module node, or the symbol or state the anchor names."""
    start = file_node(ws, anchor["value"]) if anchor["kind"] == "file" else find_node(ws, anchor["value"])
    if anchor["kind"] == "state" and ws.nodes[start]["kind"] != "state":
        raise InvalidQuery(
            f"anchor kind 'state' but {qname(start)} is a {ws.nodes[start]['kind']}; "
            "use anchor kind 'symbol'"
        )
    return start


def _slice_node_items(ws: Workspace, nodes: list[str], distance: dict[str, int]) -> list[dict[str, Any]]:
    """The slice's nodes as listed; a node only inference reached (outside the graph) is external."""
    return [
        node_item(ws, n, distance=distance[n])
        if n in ws.nodes
        else {"id": n, "kind": "external", "qualname": qname(n), "distance": distance[n]}
        for n in nodes
    ]


def _slice_contracts(ws: Workspace, nodes: list[str]) -> list[dict[str, Any]]:
    """The contracts (signature, asserts, raises) of the slice's nodes that assert or raise."""
    return [
        {
            "subject": n,
            "signature": ws.nodes[n].get("signature"),
            "asserts": ws.nodes[n].get("asserts", []),
            "raises": ws.nodes[n].get("raises", []),
        }
        for n in nodes
        if n in ws.nodes and (ws.nodes[n].get("asserts") or ws.nodes[n].get("raises"))
    ]


def _cited_evidence(
    edges: list[dict[str, Any]], edge_rank: Callable[[dict[str, Any]], int], depth: int
) -> dict[str, int]:
    """Each evidence id the slice's edges cite, with the rank of the nearest edge citing it."""
    cited: dict[str, int] = {}
    for e in edges:
        for ev in e["evidence_refs"]:
            cited[ev] = min(cited.get(ev, depth + 1), edge_rank(e))
    return cited


def evidence(ws: Workspace, request: dict[str, Any], *, runtime: dict[str, dict[str, Any]]) -> Answer:
    """query.evidence: the records behind evidence ids, the analysis' and the runtime's (`runtime`:
    the test runs recorded by execution.run_tests that resolve at this version, by id)."""
    ids = list(dict.fromkeys(request["evidence_ids"]))
    records = {i: ws.evidence.get(i) or runtime.get(i) for i in ids}
    missing = [i for i, record in records.items() if record is None]
    if missing:
        raise ObjectNotFound(
            f"no evidence {', '.join(missing[:5])} in workspace {ws.workspace_id}; evidence ids "
            "come from the evidence_refs of a result of this workspace version (a test run's, from "
            "execution.run_tests, while the files it ran on are unchanged)"
        )
    return Answer(sections=[("evidence", list(records.values()))])


def unknowns(ws: Workspace, request: dict[str, Any]) -> Answer:
    """query.unknowns: what the analysis could not resolve; imports of the standard library and
    installed packages only on request (`include_external_imports`, or `reason: external_module`)."""
    items = sorted(
        ws.unknowns.values(), key=lambda u: (u["artifact"], u["span"]["line"], u["span"]["col"], u["id"])
    )
    left_out = 0
    if not request.get("include_external_imports") and request.get("reason") != "external_module":
        kept = [u for u in items if import_origin(u) is None]
        left_out, items = len(items) - len(kept), kept
    if request.get("scope"):
        scope = find_node(ws, request["scope"])
        items = [u for u in items if within(u["scope"], {scope})]
    if request.get("reason"):
        items = [u for u in items if u["reason"] == request["reason"]]
    by_reason = Counter(u["reason"] for u in items)
    return Answer(
        sections=[("unknowns", items)],
        data={
            "total": len(items),
            "by_reason": dict(sorted(by_reason.items())),
            "external_imports_left_out": left_out,
        },
    )


def conflicts(ws: Workspace, request: dict[str, Any], *, recorded: list[dict[str, Any]]) -> Answer:
    """query.conflicts: open conflicts, optionally about one subject.

    Parameters:
        ws: the workspace.
        request: the request (optional `subject`).
        recorded: the passes' disagreements recorded by inference queries (see `infer`).

    Returns:
        One section, `conflicts`, by id.
    """
    items = sorted([*ws.conflicts.values(), *recorded], key=lambda c: c["id"])
    if request.get("subject"):
        subject = find_node(ws, request["subject"])
        items = [c for c in items if within(c["subject"], {subject})]
    return Answer(sections=[("conflicts", items)], data={"total": len(items)})
