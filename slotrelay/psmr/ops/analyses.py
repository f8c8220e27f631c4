"""The analysis operators: analysis.impact, analysis.motifs, analysis.contracts and analysis.findings.

Impact keeps direct impact (one step: callers, subclasses, readers of written state, decorated
functions), derived impact (further steps) and runtime certainty (observed executions, none recorded
by a static build) apart (CONTRACTS.md#impact); unresolved call sites that may reach the target
(same attribute name) are listed under uncertainty as possible callers, never as callers.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from slotrelay.psmr.analysis.effects import classify
from slotrelay.psmr.errors import PolicyBlocked
from slotrelay.psmr.operators import FINDING_KINDS
from slotrelay.psmr.ops import findings as findings_mod
from slotrelay.psmr.ops.observations import runtime_observations
from slotrelay.psmr.ops.queries import MAX_DEPTH, Answer
from slotrelay.psmr.ops.slicing import (
    CODE_KINDS,
    analysable,
    conflicts_on,
    find_node,
    neighbours,
    node_item,
    require_kind,
    tests_reaching,
    unknowns_in,
    within,
)
from slotrelay.psmr.workspace.identity import qname
from slotrelay.psmr.workspace.store import Store, Workspace

ORCHESTRATOR_CALLS = 3
# Context managers that hold no resource: they only suppress exceptions or stand in for one.
NO_RESOURCE = re.compile(r"^(?:[\w.]*\.)?(?:suppress|nullcontext)\(")


# Edges that do not make their source depend on their target's behaviour: containment, import
# structure, the test marker (a test's calls are walked as calls) and decoration (walked forward:
# a decorator's change reaches what it decorates). Every other relation, `calls`, `inherits`, state
# access and any kind the resolver adds for calls or reads (a property getter), is walked backwards.
NOT_DEPENDENCIES = frozenset({"defines", "imports", "tests", "decorates"})
# An unresolved call site names its callee as `receiver.attribute` (graph._describe).
_SITE = re.compile(r"^\S*\.(?P<attribute>\w+)$")


def _upstream(ws: Workspace, node: str) -> list[tuple[str, str]]:
    graph = ws.graph
    out = {(u, k) for u, _, k in graph.in_edges(node, keys=True) if k not in NOT_DEPENDENCIES}
    for _, other, k in graph.out_edges(node, keys=True):
        if k == "decorates":
            out.add((other, "decorated_by"))
        elif k == "writes_state":
            out |= {
                (u, "reads_state")
                for u, _, k2 in graph.in_edges(other, keys=True)
                if k2 == "reads_state" and u != node
            }
    return sorted(out)


def possible_callers(ws: Workspace, target: str) -> list[dict[str, Any]]:
    """The unresolved call sites whose attribute is the target's name (`self.console.print` for
    `Console.print`): each may call it, and the analysis cannot say."""
    if ws.graph.nodes[target]["kind"] not in CODE_KINDS - {"module"}:
        return []
    name = qname(target).rsplit(".", 1)[-1]
    found = []
    for unknown in ws.unknowns.values():
        site = _SITE.match(unknown["detail"])
        if site and site["attribute"] == name:
            found.append({**unknown, "possible_caller_of": target})
    return sorted(found, key=lambda u: (u["artifact"], u["span"]["line"], u["span"]["col"], u["id"]))


def impact(ws: Workspace, request: dict[str, Any], *, store: Store) -> Answer:
    """analysis.impact: what a change to the target may affect within a radius."""
    depth = request.get("depth", 3)
    if depth > MAX_DEPTH:
        raise PolicyBlocked(
            f"depth {depth} is above {MAX_DEPTH}; a radius that wide is a dump of the graph"
            ": analyse the nearer ring first"
        )
    target = analysable(
        ws, find_node(ws, request["target"]), accept_conflicts=request.get("accept_conflicts", False)
    )
    distance, via = _rings_upstream(ws, target, depth)
    radius = set(distance)
    ordered = sorted(radius - {target}, key=lambda n: (distance[n], n))
    direct = [_ring_entry(ws, n, distance, via) for n in ordered if distance[n] == 1]
    derived = [_ring_entry(ws, n, distance, via) for n in ordered if distance[n] > 1]
    motifs = [m for m in motif_instances(ws, store) if m["subject"] in radius]
    nearest_in_file = _nearest_in_file(ws, distance, depth)
    likely_tests = tests_reaching(ws, target, depth=depth + 3)
    candidates = possible_callers(ws, target)
    marked = {u["id"] for u in candidates}
    uncertainty = candidates + [u for u in unknowns_in(ws, radius) if u["id"] not in marked]
    answer = Answer(
        data={
            "target": target,
            "depth": depth,
            "runtime_certainty": _runtime_certainty(runtime_observations(ws, store, target)),
            "counts": {
                "direct": len(direct),
                "derived": len(derived),
                "unknowns": len(uncertainty),
                "possible_callers": len(candidates),
            },
        }
    )
    # Nearest-first: what is one step from the target (callers, the unknowns among them, their files
    # and tests) comes before the second ring.
    answer.add("direct", direct, lambda n: n["distance"])
    answer.add("derived", derived, lambda n: n["distance"])
    answer.add("state_coupling", _state_coupling(ws, target), lambda s: 0)
    # A possible caller is as near as a direct one.
    answer.add(
        "uncertainty",
        uncertainty,
        lambda u: min(distance.get(u["scope"], 1), 1) if u["id"] in marked else distance[u["scope"]],
    )
    answer.add("conflicts", conflicts_on(ws, radius), lambda c: distance[c["subject"]])
    answer.add("review_files", sorted(nearest_in_file), lambda f: nearest_in_file[f])
    answer.add("likely_tests", likely_tests, lambda t: t["distance"])
    answer.add("boundaries", _boundaries(ws, radius), lambda b: distance[b["node"]])
    answer.add("motifs", motifs, lambda m: distance[m["subject"]])
    return answer


def _rings_upstream(
    ws: Workspace, target: str, depth: int
) -> tuple[dict[str, int], dict[str, tuple[str, str]]]:
    """Each node within `depth` dependency steps of the target with its distance, and the node and
    relation it was reached through (the target has no entry in the second map)."""
    distance = {target: 0}
    via: dict[str, tuple[str, str]] = {}
    frontier = [target]
    for step in range(1, depth + 1):
        nxt = []
        for node in frontier:
            for other, relation in _upstream(ws, node):
                if other not in distance:
                    distance[other] = step
                    via[other] = (node, relation)
                    nxt.append(other)
        frontier = sorted(nxt)
    return distance, via


def _ring_entry(
    ws: Workspace, node: str, distance: dict[str, int], via: dict[str, tuple[str, str]]
) -> dict[str, Any]:
    source, relation = via[node]
    return node_item(ws, node, distance=distance[node], via={"node": source, "relation": relation})


def _state_coupling(ws: Workspace, target: str) -> list[dict[str, Any]]:
    """The state the target reads or writes, each with every writer and reader of it."""
    state = []
    for _, s, k in sorted(ws.graph.out_edges(target, keys=True)):
        if k in ("reads_state", "writes_state"):
            state.append(
                {
                    "state": s,
                    "access": k,
                    "writers": neighbours_in(ws, s, "writes_state"),
                    "readers": neighbours_in(ws, s, "reads_state"),
                }
            )
    return state


def _boundaries(ws: Workspace, radius: set[str]) -> list[dict[str, Any]]:
    """The calls out of the radius that have an effect (I/O, network, process, ...)."""
    boundaries = []
    for node in sorted(radius):
        for _, callee, k in ws.graph.out_edges(node, keys=True):
            effect = classify(qname(callee)) if k == "calls" else None
            if effect:
                boundaries.append({"node": node, "crosses": callee, "effect": effect})
    return boundaries


def _nearest_in_file(ws: Workspace, distance: dict[str, int], depth: int) -> dict[str, int]:
    """Each file of the radius with the distance of its nearest node."""
    nearest: dict[str, int] = {}
    for node, away in distance.items():
        artifact = ws.graph.nodes[node].get("artifact")
        if artifact:
            nearest[artifact] = min(nearest.get(artifact, depth), away)
    return nearest


def _runtime_certainty(observed: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "observed": observed,
        "note": "tests that ran the target in execution.run_tests (authority runtime:pytest), on the "
        "files as they are now; direct and derived impact stay static reachability"
        if observed
        else "no runtime evidence is recorded for the target: direct "
        "and derived impact are static reachability, not observed executions",
    }


def neighbours_in(ws: Workspace, state: str, relation: str) -> list[str]:
    return sorted({u for u, _, k in ws.graph.in_edges(state, keys=True) if k == relation})


_MOTIFS: dict[tuple[str, str], list[dict[str, Any]]] = {}


def motif_instances(ws: Workspace, store: Store) -> list[dict[str, Any]]:
    """Every motif instance of the workspace, with the evidence that makes it one, by id.

    Computed once per workspace version in a process (the MCP server asks many times).
    """
    key = (ws.workspace_id, ws.version)
    if key not in _MOTIFS:
        _MOTIFS[key] = _find_motifs(ws, store)
    return _MOTIFS[key]


def _find_motifs(ws: Workspace, store: Store) -> list[dict[str, Any]]:
    graph = ws.graph
    out: list[dict[str, Any]] = []

    def add(motif: str, subject: str, why: str, evidence: list[str]) -> None:
        out.append(
            {
                "id": f"motif:{motif}:{qname(subject)}",
                "motif": motif,
                "subject": subject,
                "why": why,
                "evidence_refs": sorted(set(evidence)),
            }
        )

    for _artifact, entry in sorted(ws.files.items()):
        facts = store.get_facts(entry["key"]) or {}
        scopes: dict[str, list[str]] = {}
        for w in facts.get("withs") or []:
            if not NO_RESOURCE.match(w["expr"]):
                scopes.setdefault(w["scope"], []).append(f"{w['expr']} at line {w['span'][0]}")
        for scope, exprs in sorted(scopes.items()):
            subject = f"semantic:{scope}"
            if subject in graph:
                add(
                    "resource_scope",
                    subject,
                    "acquires and releases in a with block: " + "; ".join(exprs),
                    list(graph.nodes[subject].get("evidence", [])),
                )
    for node, data in sorted(graph.nodes(data=True)):
        if data["kind"] not in CODE_KINDS:
            continue
        reads = {
            v: e["evidence"]
            for _, v, k, e in graph.out_edges(node, keys=True, data=True)
            if k == "reads_state"
        }
        writes = {
            v: e["evidence"]
            for _, v, k, e in graph.out_edges(node, keys=True, data=True)
            if k == "writes_state"
        }
        both = sorted(v for v in set(reads) & set(writes) if _read_first(ws, reads[v], writes[v]))
        if both and data["kind"] != "module":
            add(
                "read_modify_write",
                node,
                "reads then writes " + ", ".join(qname(s) for s in both),
                [ev for s in both for ev in reads[s] + writes[s]],
            )
        calls = [
            (v, e["evidence"]) for _, v, k, e in graph.out_edges(node, keys=True, data=True) if k == "calls"
        ]
        effects = [(v, ev) for v, ev in calls if classify(qname(v))]
        if effects and data["kind"] != "module":
            add(
                "boundary_adapter",
                node,
                "crosses " + ", ".join(sorted({f"{classify(qname(v))} ({qname(v)})" for v, _ in effects})),
                [e for _, ev in effects for e in ev],
            )
        internal = [(v, ev) for v, ev in calls if graph.nodes[v]["kind"] in CODE_KINDS]
        if writes and len({v for v, _ in internal}) >= ORCHESTRATOR_CALLS and data["kind"] != "module":
            add(
                "stateful_orchestrator",
                node,
                f"writes {len(writes)} state and drives {len({v for v, _ in internal})} other functions",
                [e for evs in writes.values() for e in evs] + [e for _, ev in internal for e in ev],
            )
    return sorted(out, key=lambda m: m["id"])


def _read_first(ws: Workspace, reads: list[str], writes: list[str]) -> bool:
    """True if some read starts before some write statement ends: a read on the right of the
    assignment, or earlier, feeds the write. A read only after every write is no read-modify-write."""

    def at(ev: str, end: bool) -> tuple[int, int]:
        span = ws.evidence[ev]["span"]
        return (span["end_line"], span["end_col"]) if end else (span["line"], span["col"])

    return any(at(r, end=False) < at(w, end=True) for r in reads for w in writes)


def in_tests(ws: Workspace, node: str) -> bool:
    """Whether a symbol is test code: a test, or anything of a module pytest collects or a conftest."""
    data = ws.graph.nodes[node]
    module = data.get("module") or qname(node)
    last = module.rsplit(".", 1)[-1]
    return (
        data["kind"] == "test"
        or last.startswith("test_")
        or last.endswith("_test")
        or last == "conftest"
        or ".tests." in f".{module}."
    )


def motifs(ws: Workspace, request: dict[str, Any], *, store: Store) -> Answer:
    """analysis.motifs: motif instances of the production code, optionally of one motif or inside one
    scope; those of test code (`pytest.raises` scopes, fixtures) apart, listed with `include_tests`."""
    items = motif_instances(ws, store)
    if request.get("motif"):
        items = [m for m in items if m["motif"] == request["motif"]]
    if request.get("scope"):
        scope = find_node(ws, request["scope"])
        items = [m for m in items if within(m["subject"], {scope})]
    tests = [m for m in items if in_tests(ws, m["subject"])]
    production = [m for m in items if not in_tests(ws, m["subject"])]
    sections = [("motifs", production)]
    if request.get("include_tests"):
        sections.append(("test_motifs", tests))
    shown = [m for _, section in sections for m in section]
    return Answer(
        sections=sections,
        data={"total": len(production), "in_tests": len(tests)},
        evidence_refs=[e for m in shown for e in m["evidence_refs"]],
    )


def contracts(ws: Workspace, request: dict[str, Any], *, store: Store) -> Answer:
    """analysis.contracts: signature, docstring, asserts, raises and tests of a function or class."""
    target = analysable(
        ws, find_node(ws, request["target"]), accept_conflicts=request.get("accept_conflicts", False)
    )
    require_kind(ws, target, {"function", "method", "class", "lambda", "test"}, "analysis.contracts")
    data = ws.graph.nodes[target]
    members = [target]
    if data["kind"] == "class":
        members += [
            n
            for n in neighbours(ws, target, "defines")
            if ws.graph.nodes[n]["kind"] in ("method", "function")
        ]
    items = []
    for node in members:
        d = ws.graph.nodes[node]
        ev = d.get("evidence", [])
        items.append(
            {
                "subject": node,
                "signature": d.get("signature"),
                "docstring": d.get("doc"),
                "preconditions": [a for a in d.get("asserts", []) if a["role"] == "precondition"],
                "postconditions": [a for a in d.get("asserts", []) if a["role"] == "postcondition"],
                "raises": d.get("raises", []),
                "decorators": d.get("decorators", []),
                "api_contract": {"public": not qname(node).rsplit(".", 1)[-1].startswith("_")},
                "evidence_refs": ev,
            }
        )
    tests = tests_reaching(ws, target)
    # Only what is computed is answered: no policy or intent-constraint contract is derived from code.
    answer = Answer(data={"target": target})
    answer.sections = [("contracts", items), ("test_contract", tests)]
    answer.evidence_refs = [e for i in items for e in i["evidence_refs"]]
    return answer


def findings(ws: Workspace, request: dict[str, Any], *, store: Store) -> Answer:
    """analysis.findings: three unmerged lists (confirmed_defect, anomaly, hotspot); `labels` counts
    the anomalies labelled apart (guarded names, demo blocks)."""
    found = findings_mod.all_findings(ws, store)
    scope = find_node(ws, request["scope"]) if request.get("scope") else None
    kinds = [request["kind"]] if request.get("kind") else list(FINDING_KINDS)
    sections = []
    for kind in kinds:
        items = found[kind]
        if scope:
            items = [f for f in items if within(f["subject"], {scope})]
        sections.append((kind, items))
    labels = Counter(f["label"] for k, items in sections if k == "anomaly" for f in items if f.get("label"))
    return Answer(
        sections=sections,
        data={"counts": {k: len(v) for k, v in sections}, "labels": dict(sorted(labels.items()))},
    )
