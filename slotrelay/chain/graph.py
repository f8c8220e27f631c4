"""The chain as a graph (networkx): the structural checks `validate` reports, and rendering.

Nodes are the chain's nodes; edges are routes (an edge keeps its route). A chain is usable when ids
are unique, routes name existing nodes, it has a start node (no input slot), every other node is
reached by a route, a route never targets a start node, and there is no cycle.

Everything here is linear in the size of the chain and bounded in what it prints: a cycle is reported
per strongly connected component (never every simple cycle, which is exponential), and the drawings
cut long labels, because a chain file is input and may be hostile.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Iterable

import networkx as nx

from slotrelay.chain.errors import ChainError, Problem
from slotrelay.chain.models import Chain, Route
from slotrelay.errors import ExitCode

MAX_NAMES_SHOWN = 10
"""Node names spelled out in one cycle message."""
MAX_LABEL_CHARS = 120
"""Longest label drawn; longer ones end in an ellipsis (Graphviz crashes on labels of megabytes)."""


def build_graph(chain: Chain) -> nx.MultiDiGraph[str]:
    """The chain's graph: one vertex per node (attribute `node`), one edge per route (attribute `route`)."""
    graph: nx.MultiDiGraph[str] = nx.MultiDiGraph(chain_id=chain.chain_id)
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
        problems.append(
            Problem(f"$.error_types[{index}].error_type", f"duplicate error_type {type_names[index]!r}"))
    outputs = [n.output_slot.path for n in chain.nodes]
    for index in _duplicate_indexes(outputs):
        problems.append(
            Problem(f"$.nodes[{index}].output_slot.path", f"another node writes {outputs[index]!r} too"))

    known = set(node_ids)
    starts = {n.node_id for n in chain.nodes if n.input_slot is None}
    for index, route in enumerate(chain.routes):
        for end in ("from_node", "to_node"):
            if getattr(route, end) not in known:
                problems.append(Problem(f"$.routes[{index}].{end}", f"unknown node {getattr(route, end)!r}"))
        if route.to_node in starts:
            problems.append(
                Problem(f"$.routes[{index}].to_node",
                        f"{route.to_node!r} is a start node (input_slot null): a route cannot feed it")
            )
    if not starts:
        problems.append(Problem("$.nodes", "no start node: at least one node needs \"input_slot\": null"))
    reached = {r.to_node for r in chain.routes}
    for index, node in enumerate(chain.nodes):
        if node.input_slot is not None and node.node_id not in reached:
            problems.append(
                Problem(f"$.nodes[{index}]", f"no route reaches {node.node_id!r} and it is not a start node"))
    problems.extend(_cycle_problems(chain))
    return problems


def _cycle_problems(chain: Chain) -> list[Problem]:
    """One problem per strongly connected component of unbounded routes that holds a cycle, in linear time.

    Listing every simple cycle is exponential (10 fully connected nodes have over a million), so each
    component is named by one cycle found by a depth-first search, and its size; both are cut to
    MAX_NAMES_SHOWN names so a message stays short whatever the chain.
    """
    # A route with max_iterations is a bounded rework loop; every other cycle is refused.
    full = build_graph(chain)
    graph: nx.DiGraph[str] = nx.DiGraph()
    graph.add_nodes_from(full)
    routes: Iterable[tuple[str, str, Route]] = full.edges(data="route")
    graph.add_edges_from((u, v) for u, v, route in routes if route.max_iterations is None)
    order = {node.node_id: index for index, node in enumerate(chain.nodes)}
    components = [sorted(c, key=order.__getitem__) for c in nx.strongly_connected_components(graph)]
    problems = []
    for component in sorted(components, key=lambda c: order[c[0]]):
        if len(component) == 1 and not graph.has_edge(component[0], component[0]):
            continue
        cycle = [source for source, _ in nx.find_cycle(graph.subgraph(component), source=component[0])]
        message = f"cycle: {_arrow_path(cycle)}"
        if len(component) > len(cycle):
            message += f"; {len(component)} nodes reach each other through routes: {_names(component)}"
        problems.append(Problem("$.routes", message))
    return problems


def _arrow_path(cycle: list[str]) -> str:
    if len(cycle) > MAX_NAMES_SHOWN:
        shown = [*cycle[: MAX_NAMES_SHOWN - 1], "…", cycle[0]]
        return " -> ".join(shown) + f" (a cycle of {len(cycle)} nodes)"
    return " -> ".join([*cycle, cycle[0]])


def _names(node_ids: list[str]) -> str:
    shown = ", ".join(node_ids[:MAX_NAMES_SHOWN])
    if len(node_ids) <= MAX_NAMES_SHOWN:
        return shown
    return f"{shown} and {len(node_ids) - MAX_NAMES_SHOWN} more"


def _duplicate_indexes(values: list[str]) -> list[int]:
    repeated = _duplicates(values)
    seen: set[str] = set()
    indexes = []
    for index, value in enumerate(values):
        if value in repeated and value in seen:
            indexes.append(index)
        seen.add(value)
    return indexes


def printable(text: str, *, limit: int) -> str:
    """Text from a chain file fit to print or draw, on one line.

    Parameters:
        text: any string, possibly megabytes long, holding line breaks of any kind, terminal escape
            sequences or lone surrogates (JSON allows `"\\ud800"`, which cannot be encoded).
        limit: the most characters kept; a longer text ends in an ellipsis.

    Returns:
        At most `limit` characters, every character that is not printable written as its Python
        escape (`\\n`, `\\x1b`, `\\u2028`, `\\ud800`).
    """
    cut = text[:limit]
    if not cut.isprintable():
        cut = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in cut)
    if len(cut) > limit or len(text) > limit:
        cut = cut[: limit - 1] + "…"
    return cut


def _label(text: str) -> str:
    return printable(text, limit=MAX_LABEL_CHARS)


def _condition_label(route: Route) -> str:
    if route.condition is None:
        return _label(route.route_id)
    c = route.condition
    extra = f" +{len(c.additional_checks)} checks" if c.additional_checks else ""
    value = json.dumps(c.value, ensure_ascii=False)
    return _label(f"{route.route_id}: {c.field} {c.operator} {value}{extra}")


def render_mermaid(chain: Chain) -> str:
    """The chain as a Mermaid flowchart (`flowchart LR`)."""
    ids = {n.node_id: f"n{i}" for i, n in enumerate(chain.nodes)}
    lines = ["flowchart LR"]
    for node in chain.nodes:
        label = f"{_label(node.node_id)}<br/>{node.executor.kind}"
        shape = ("([", "])") if node.input_slot is None else ("[", "]")
        lines.append(f'    {ids[node.node_id]}{shape[0]}"{label}"{shape[1]}')
    for route in chain.routes:
        label = _condition_label(route).replace('"', "'")
        lines.append(f'    {ids[route.from_node]} -->|"{label}"| {ids[route.to_node]}')
    return "\n".join(lines) + "\n"


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def render_dot(chain: Chain) -> str:
    """The chain as Graphviz DOT (vertices are named n0, n1, ... and labelled with the node ids)."""
    ids = {n.node_id: f"n{i}" for i, n in enumerate(chain.nodes)}
    lines = [f"digraph {_dot_quote(_label(chain.chain_id))} {{", "    rankdir=LR;",
             "    node [shape=box, fontname=Helvetica];"]
    for node in chain.nodes:
        shape = ", shape=oval" if node.input_slot is None else ""
        label = _dot_quote(_label(node.node_id) + "\n" + node.executor.kind)
        lines.append(f"    {ids[node.node_id]} [label={label}{shape}];")
    for route in chain.routes:
        label = _dot_quote(_condition_label(route))
        lines.append(f"    {ids[route.from_node]} -> {ids[route.to_node]} [label={label}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_png(chain: Chain) -> bytes:
    """The chain as a PNG image, drawn by Graphviz `dot`.

    Raises:
        ChainError: Graphviz's `dot` program is not installed (code GRAPHVIZ_MISSING), or it failed on
            this chain (code GRAPHVIZ_FAILED).
    """
    import graphviz

    try:
        png: bytes = graphviz.Source(render_dot(chain)).pipe(format="png")
        return png
    except graphviz.ExecutableNotFound:
        raise ChainError("Graphviz `dot` is not installed (apt-get install graphviz)",
                         code="GRAPHVIZ_MISSING", exit_code=ExitCode.ENVIRONMENT_MISSING) from None
    except subprocess.CalledProcessError as failed:
        said = (failed.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        raise ChainError(f"Graphviz `dot` could not draw this chain (exit {failed.returncode}"
                         f"{': ' + _label(said[-1]) if said else ''})", code="GRAPHVIZ_FAILED") from None
