"""A page of a slice as an SVG picture, laid out by graphviz's `dot`: nothing is placed by hand.

The picture holds the page's edges with their endpoints, and the anchor. A node of the page that no
edge of the page touches is listed in the page's table, not drawn: a slice larger than a page puts
its nodes before its edges, and a column of a hundred unconnected boxes tells a reader nothing.
An endpoint whose node item sits on another page of the slice is drawn dashed-grey. Each node links to its own
symbol page; each edge links to its evidence page. Graphviz escapes the labels; node names in the
dot source are generated (`n0`, `n1`, ...) because semantic identities hold `:`, dot's port syntax.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import graphviz

from psmr_view.errors import ViewError
from slotrelay.psmr.graph import qname

SHAPES = {
    "module": "folder",
    "class": "component",
    "function": "box",
    "method": "box",
    "lambda": "box",
    "test": "note",
    "state": "ellipse",
    "external": "box",
    "builtin": "box",
}
EDGE_COLOURS = {
    "calls": "#1f4e79",
    "reads_state": "#2e7d32",
    "writes_state": "#c62828",
    "inherits": "#6a1b9a",
    "decorates": "#8d6e63",
    "defines": "#9e9e9e",
    "imports": "#9e9e9e",
    "tests": "#ef6c00",
}
_PROLOG = re.compile(r"^.*?(?=<svg)", re.DOTALL)


def _short(identity: str) -> str:
    """The last two dotted parts: enough to read a picture, the full name is in the tooltip."""
    return ".".join(qname(identity).split(".")[-2:])


def slice_svg(
    anchor: str,
    nodes: list[dict[str, Any]],
    edges: list[dict[str, Any]],
    *,
    node_url: Callable[[str], str],
    edge_url: Callable[[dict[str, Any]], str],
) -> str:
    """The SVG markup of one page of a slice.

    Parameters:
        anchor: the slice's anchor (drawn filled).
        nodes: the page's node items (`id`, `kind`, `distance`).
        edges: the page's edge items (`source`, `relation`, `target`, `evidence_refs`, ...).
        node_url: the link of a node.
        edge_url: the link of an edge (its evidence page).

    Returns:
        `<svg ...>...</svg>`, ready to inline in HTML; empty when the page has neither edges nor
        the anchor.

    Raises:
        ViewError: LAYOUT_FAILED (503) when graphviz's `dot` is missing or fails.
    """
    kinds = {n["id"]: n["kind"] for n in nodes}
    names: dict[str, str] = {}

    def name(identity: str) -> str:
        if identity not in names:
            names[identity] = f"n{len(names)}"
        return names[identity]

    dot = graphviz.Digraph(
        graph_attr={"rankdir": "LR", "fontname": "Helvetica", "bgcolor": "transparent", "nodesep": "0.25"},
        node_attr={"fontname": "Helvetica", "fontsize": "10", "style": "rounded", "height": "0.3"},
        edge_attr={"fontname": "Helvetica", "fontsize": "8", "arrowsize": "0.6"},
    )
    drawn = ([anchor] if anchor in kinds else []) + [i for e in edges for i in (e["source"], e["target"])]
    if not drawn:
        return ""
    for identity in drawn:
        if identity in names:
            continue
        kind = kinds.get(identity)
        style = "rounded,dashed" if kind in (None, "external", "builtin") else "rounded"
        attrs = {
            "label": graphviz.escape(_short(identity)),
            "tooltip": graphviz.escape(identity),
            "shape": SHAPES.get(kind or "", "box"),
            "style": ("filled," + style) if identity == anchor else style,
            "fillcolor": "#fff3c4",
            "color": "#9e9e9e" if kind is None else "#37474f",
            "id": f"node-{len(names)}",
            "class": f"kind-{kind or 'elsewhere'}" + (" anchor" if identity == anchor else ""),
            # Pre-escaped: dot copies URLs into the SVG as they are (it keeps existing entities).
            "URL": node_url(identity).replace("&", "&amp;"),
        }
        dot.node(name(identity), **attrs)
    for index, edge in enumerate(edges):
        about = f"{qname(edge['source'])} {edge['relation']} {qname(edge['target'])}"
        dot.edge(
            name(edge["source"]),
            name(edge["target"]),
            color=EDGE_COLOURS.get(edge["relation"], "#37474f"),
            style="dashed" if edge.get("status") not in (None, "confirmed") else "solid",
            tooltip=graphviz.escape(f"{about} ({edge.get('resolution')}, {edge.get('status')})"),
            id=f"edge-{index}",
            **{"class": f"rel-{edge['relation']}"},
            URL=edge_url(edge).replace("&", "&amp;"),
        )
    try:
        svg = dot.pipe(format="svg", encoding="utf-8")
    except (graphviz.ExecutableNotFound, graphviz.CalledProcessError, OSError) as exc:
        raise ViewError(
            "LAYOUT_FAILED",
            f"graphviz could not lay out this page of the slice ({type(exc).__name__}); "
            "install graphviz (`apt-get install graphviz`) or narrow the relations",
            status=503,
        ) from exc
    return _PROLOG.sub("", svg, count=1)
