"""The chain as a graph (networkx): the structural checks `validate` reports, and rendering.

Nodes are the chain's nodes; edges are routes (an edge keeps its route). A chain is usable when ids
are unique, routes name existing nodes, it has a start node (no input slot), every other node is
reached by a route, a route never targets a start node, and there is no cycle.

Everything here is linear in the size of the chain and bounded in what it prints: a cycle is reported
per strongly connected component (never every simple cycle, which is exponential), and the drawings
cut long labels, because a chain file is input and may be hostile. Drawings run top to bottom; DOT and
PNG wrap a long chain into columns so that it fits a page.
"""

from __future__ import annotations

import json
import math
import subprocess
from collections import Counter, defaultdict
from collections.abc import Iterable

import networkx as nx

from slotrelay.chain.errors import ChainError, Problem
from slotrelay.chain.models import Chain, Route
from slotrelay.errors import ExitCode

MAX_NAMES_SHOWN = 10
"""Node names spelled out in one cycle message."""
MAX_LABEL_CHARS = 120
"""Longest label drawn; longer ones end in an ellipsis (Graphviz crashes on labels of megabytes)."""

# The drawing's size is estimated from the labels (see _columns), in pixels of Graphviz's 96-dpi PNG.
PAGE_ASPECT = 0.8
"""Width over height a drawing aims at: a page, a little taller than wide."""
LAYER_PX = 125
"""Height of one layer: a node, and the rank of the labels of the routes into it."""
NODE_CHAR_PX, LABEL_CHAR_PX = 9, 7.5
"""Width of a character of a node's label (Helvetica 14), and of a route's (Helvetica 11)."""
NODE_PAD_PX, NODE_GAP_PX = 20, 40
"""A node's box around its label, and the room between two nodes of a layer."""
COLUMN_GAP_PX = 120
"""Room between two columns for the route that climbs from the bottom of one to the top of the next."""


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


def _route_lines(route: Route) -> list[str]:
    """A route's label: its id, then its condition, each a line of at most half of MAX_LABEL_CHARS."""
    line = MAX_LABEL_CHARS // 2
    if route.condition is None:
        return [printable(route.route_id, limit=line)]
    c = route.condition
    extra = f" +{len(c.additional_checks)} checks" if c.additional_checks else ""
    value = json.dumps(c.value, ensure_ascii=False)
    condition = f"{c.field} {c.operator} {value}{extra}"
    return [printable(route.route_id, limit=line), printable(condition, limit=line)]


def _columns(chain: Chain) -> dict[str, int]:
    """The column each node is drawn in, so that a long chain wraps into columns that fit a page.

    A node's layer is one below the deepest node a route into it comes from (loop routes, those with
    max_iterations, do not count); consecutive layers are cut into columns of as many layers each.
    The number of columns is the one whose drawing comes closest to PAGE_ASPECT, estimated from the
    labels' lengths, not by running Graphviz, so the DOT text and the PNG are one drawing. Linear in the
    chain's size; an invalid chain with a cycle is drawn as it is, in one column.
    """
    graph: nx.DiGraph[str] = nx.DiGraph()
    graph.add_nodes_from(node.node_id for node in chain.nodes)
    graph.add_edges_from((r.from_node, r.to_node) for r in chain.routes
                         if r.max_iterations is None and r.from_node in graph and r.to_node in graph)
    try:
        layers = list(nx.topological_generations(graph))
    except nx.NetworkXUnfeasible:
        return dict.fromkeys(graph, 0)
    if not layers:
        return {}
    labels_px: defaultdict[str, float] = defaultdict(float)
    for route in chain.routes:
        labels_px[route.to_node] += LABEL_CHAR_PX * max(map(len, _route_lines(route)))
    node_px = {n.node_id: NODE_PAD_PX + NODE_CHAR_PX * max(len(_label(n.node_id)), len(n.executor.kind))
               for n in chain.nodes}
    # The labels of the routes into a node stand beside the route, right of the node's middle.
    column_px = COLUMN_GAP_PX + max(
        sum(NODE_GAP_PX + max(node_px[n], node_px[n] / 2 + labels_px[n]) for n in layer) for layer in layers)

    def off_page(columns: int) -> float:
        height = math.ceil(len(layers) / columns) * LAYER_PX
        return abs(math.log(columns * column_px / height / PAGE_ASPECT))

    per_column = math.ceil(len(layers) / min(range(1, len(layers) + 1), key=off_page))
    return {node: index // per_column for index, layer in enumerate(layers) for node in layer}


def render_mermaid(chain: Chain) -> str:
    """The chain as a Mermaid flowchart, top to bottom (`flowchart TB`).

    Mermaid cannot wrap ranks into columns (a subgraph's direction is ignored once its nodes link
    outside it), so a long chain is a tall chart; the DOT and PNG drawings wrap.
    """
    ids = {n.node_id: f"n{i}" for i, n in enumerate(chain.nodes)}
    lines = ["flowchart TB"]
    for node in chain.nodes:
        label = f"{_label(node.node_id)}<br/>{node.executor.kind}"
        shape = ("([", "])") if node.input_slot is None else ("[", "]")
        lines.append(f'    {ids[node.node_id]}{shape[0]}"{label}"{shape[1]}')
    for route in chain.routes:
        label = "<br/>".join(_route_lines(route)).replace('"', "'")
        lines.append(f'    {ids[route.from_node]} -->|"{label}"| {ids[route.to_node]}')
    return "\n".join(lines) + "\n"


def _dot_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_dot(chain: Chain) -> str:
    """The chain as Graphviz DOT, top to bottom, a long chain wrapped into columns.

    Vertices are named n0, n1, ... and labelled with the node ids. A route between two columns, and a
    loop route, is drawn without constraining the ranks (`constraint=false`): that is what lets the
    next column start again at the top.
    """
    ids = {n.node_id: f"n{i}" for i, n in enumerate(chain.nodes)}
    column = _columns(chain)
    lines = [f'digraph "{_dot_escape(_label(chain.chain_id))}" {{', "    rankdir=TB;", "    nodesep=0.4;",
             "    node [shape=box, fontname=Helvetica];",
             "    edge [fontname=Helvetica, fontsize=11, fontcolor=gray25];"]
    for node in chain.nodes:
        shape = ", shape=oval" if node.input_slot is None else ""
        label = f"{_dot_escape(_label(node.node_id))}\\n{node.executor.kind}"
        lines.append(f'    {ids[node.node_id]} [label="{label}"{shape}];')
    for route in chain.routes:
        # \l ends a left-justified line: the route id and its condition start at the same x.
        label = "".join(f"{_dot_escape(line)}\\l" for line in _route_lines(route))
        loose = route.max_iterations is not None or column.get(route.from_node) != column.get(route.to_node)
        lines.append(f'    {ids[route.from_node]} -> {ids[route.to_node]} [label="{label}"'
                     f'{", constraint=false" if loose else ""}];')
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
