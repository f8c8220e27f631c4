"""The chain as a graph (networkx): the structural checks `validate` reports, and rendering.

Nodes are the chain's nodes; edges are routes (an edge keeps its route). A chain is usable when ids
are unique, routes name existing nodes, it has a start node (no input slot), every other node is
reached by a route, a route never targets a start node, and there is no cycle.
"""

from __future__ import annotations

import json
from collections import Counter

import networkx as nx

from slotrelay.chain.errors import ChainError, Problem
from slotrelay.chain.models import Chain, Route


def build_graph(chain: Chain) -> nx.MultiDiGraph:
    """The chain's graph: one vertex per node (attribute `node`), one edge per route (attribute `route`)."""
    graph = nx.MultiDiGraph(chain_id=chain.chain_id)
    for node in chain.nodes:
        graph.add_node(node.node_id, node=node)
    for route in chain.routes:
        if route.from_node in graph and route.to_node in graph:
            graph.add_edge(route.from_node, route.to_node, key=route.route_id, route=route)
    return graph


def _duplicates(values: list[str]) -> set[str]:
    return {value for value, count in Counter(values).items() if count > 1}


def graph_problems(chain: Chain) -> list[Problem]:
    """Every structural problem of a parsed chain, each with the JSON path it is about."""
    problems: list[Problem] = []
    node_ids = [n.node_id for n in chain.nodes]
    for index in _duplicate_indexes(node_ids):
        problems.append(Problem(f"$.nodes[{index}].node_id", f"duplicate node_id {node_ids[index]!r}"))
    route_ids = [r.route_id for r in chain.routes]
    for index in _duplicate_indexes(route_ids):
        problems.append(Problem(f"$.routes[{index}].route_id", f"duplicate route_id {route_ids[index]!r}"))
    type_names = [e.error_type for e in chain.error_types]
    for index in _duplicate_indexes(type_names):
        problems.append(Problem(f"$.error_types[{index}].error_type", f"duplicate error_type {type_names[index]!r}"))
    outputs = [n.output_slot.path for n in chain.nodes]
    for index in _duplicate_indexes(outputs):
        problems.append(Problem(f"$.nodes[{index}].output_slot.path", f"another node writes {outputs[index]!r} too"))

    known = set(node_ids)
    starts = {n.node_id for n in chain.nodes if n.input_slot is None}
    for index, route in enumerate(chain.routes):
        for end in ("from_node", "to_node"):
            if getattr(route, end) not in known:
                problems.append(Problem(f"$.routes[{index}].{end}", f"unknown node {getattr(route, end)!r}"))
        if route.to_node in starts:
            problems.append(
                Problem(f"$.routes[{index}].to_node", f"{route.to_node!r} is a start node (input_slot null): a route cannot feed it")
            )
    if not starts:
        problems.append(Problem("$.nodes", "no start node: at least one node needs \"input_slot\": null"))
    reached = {r.to_node for r in chain.routes}
    for index, node in enumerate(chain.nodes):
        if node.input_slot is not None and node.node_id not in reached:
            problems.append(Problem(f"$.nodes[{index}]", f"no route reaches {node.node_id!r} and it is not a start node"))
    # A route with max_iterations is a bounded rework loop; every other cycle is refused.
    unbounded = nx.DiGraph([(r.from_node, r.to_node) for r in chain.routes if r.max_iterations is None])
    for cycle in nx.simple_cycles(unbounded):
        problems.append(Problem("$.routes", f"cycle: {' -> '.join([*cycle, cycle[0]])}"))
    return problems


def _duplicate_indexes(values: list[str]) -> list[int]:
    repeated = _duplicates(values)
    seen: set[str] = set()
    indexes = []
    for index, value in enumerate(values):
        if value in repeated and value in seen:
            indexes.append(index)
        seen.add(value)
    return indexes


def _condition_label(route: Route) -> str:
    if route.condition is None:
        return route.route_id
    c = route.condition
    extra = f" +{len(c.additional_checks)} checks" if c.additional_checks else ""
    return f"{route.route_id}: {c.field} {c.operator} {json.dumps(c.value, ensure_ascii=False)}{extra}"


def render_mermaid(chain: Chain) -> str:
    """The chain as a Mermaid flowchart (`flowchart LR`)."""
    ids = {n.node_id: f"n{i}" for i, n in enumerate(chain.nodes)}
    lines = ["flowchart LR"]
    for node in chain.nodes:
        label = f"{node.node_id}<br/>{node.executor.kind}"
        shape = ("([", "])") if node.input_slot is None else ("[", "]")
        lines.append(f'    {ids[node.node_id]}{shape[0]}"{label}"{shape[1]}')
    for route in chain.routes:
        label = _condition_label(route).replace('"', "'")
        lines.append(f'    {ids[route.from_node]} -->|"{label}"| {ids[route.to_node]}')
    return "\n".join(lines) + "\n"


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def render_dot(chain: Chain) -> str:
    """The chain as Graphviz DOT."""
    lines = [f"digraph {_dot_quote(chain.chain_id)} {{", "    rankdir=LR;", "    node [shape=box, fontname=Helvetica];"]
    for node in chain.nodes:
        shape = ", shape=oval" if node.input_slot is None else ""
        label = _dot_quote(node.node_id + "\n" + node.executor.kind)
        lines.append(f"    {_dot_quote(node.node_id)} [label={label}{shape}];")
    for route in chain.routes:
        lines.append(
            f"    {_dot_quote(route.from_node)} -> {_dot_quote(route.to_node)} [label={_dot_quote(_condition_label(route))}];"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_png(chain: Chain) -> bytes:
    """The chain as a PNG image, drawn by Graphviz `dot`.

    Raises:
        ChainError: Graphviz's `dot` program is not installed (code GRAPHVIZ_MISSING).
    """
    import graphviz

    try:
        return graphviz.Source(render_dot(chain)).pipe(format="png")
    except graphviz.ExecutableNotFound:
        raise ChainError("Graphviz `dot` is not installed (apt-get install graphviz)", code="GRAPHVIZ_MISSING") from None
