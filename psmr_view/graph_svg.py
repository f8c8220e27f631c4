"""Pictures laid out by graphviz's `dot` (nothing is placed by hand): a slice around a symbol, and a
workspace's modules as a map.

A slice's picture holds the anchor and its nearest neighbours, at most `MAX_DRAWN` of them (nearest
first, the tree's own before references outside it), with the page's edges among them: a picture of
a few hundred boxes is read by nobody, so the rest is counted and listed below it, page by page. A
node of the page that no edge of the page touches is not drawn either. An endpoint whose node item
sits on another page of the slice is drawn dashed-grey. Each node links to its own symbol page; each
edge links to its evidence page. A `calls` edge whose every site is the exception of a `raise` is
drawn as `raises` (`psmr_view.sites`).

The module map draws the largest modules (`slotrelay.psmr.ops.overview.module_map`), boxed by package,
each sized by its symbols, with each module's most-used imports as arrows.

Graphviz escapes the labels; node names in the dot source are generated (`n0`, `n1`, ...) because
semantic identities hold `:`, dot's port syntax.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import graphviz

from psmr_view.errors import ViewError
from slotrelay.psmr.ops.overview import ModuleMap
from slotrelay.psmr.workspace.graph import qname

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
    "raises": "#ad1457",
    "reads_state": "#2e7d32",
    "writes_state": "#c62828",
    "inherits": "#6a1b9a",
    "decorates": "#8d6e63",
    "defines": "#9e9e9e",
    "imports": "#9e9e9e",
    "tests": "#ef6c00",
}
OUTSIDE = frozenset({None, "external", "builtin"})
# The most nodes a slice's picture draws: what a 1,400 by 1,000-pixel window shows without scrolling
# even when all but the anchor sit in one column (a class's callers, laid out left to right: 19 boxes
# of 0.28 inch, 0.12 apart, are about 750 pixels high).
MAX_DRAWN = 20
_PROLOG = re.compile(r"^.*?(?=<svg)", re.DOTALL)


def _labels(identities: list[str]) -> dict[str, str]:
    """Each name's last two dotted parts, or more where two names would read the same: enough to read a
    picture, the full name is in the tooltip."""
    parts = {identity: qname(identity).split(".") for identity in identities}
    shown = {identity: 2 for identity in identities}
    while True:
        labels = {identity: ".".join(parts[identity][-shown[identity] :]) for identity in identities}
        seen: dict[str, list[str]] = {}
        for identity, label in labels.items():
            seen.setdefault(label, []).append(identity)
        clashes = [i for same in seen.values() if len(same) > 1 for i in same if shown[i] < len(parts[i])]
        if not clashes:
            return labels
        for identity in clashes:
            shown[identity] += 1


@dataclass
class Picture:
    """What a slice's picture draws: its nodes (anchor first) and the edges among them."""

    nodes: list[str]
    edges: list[dict[str, Any]]


def nearest(
    anchor: str, nodes: list[dict[str, Any]], edges: list[dict[str, Any]], *, limit: int = MAX_DRAWN
) -> Picture:
    """The anchor and at most `limit` - 1 of the page's nodes that its edges touch, nearest first (by
    the slice's distance; at one distance the tree's own symbols before references outside it, then
    by name), with the page's edges among them. An edge's endpoint whose node item is not on the page
    is drawn only when no node item besides the anchor is (a page cut by its edges before its nodes).

    Parameters:
        anchor: the slice's anchor.
        nodes: the page's node items (`id`, `kind`, `distance`).
        edges: the page's edge items.
        limit: the most nodes drawn.

    Returns:
        The picture; empty when the page has neither edges nor the anchor.
    """
    items = {n["id"]: n for n in nodes}
    unplaced = max((n["distance"] for n in nodes), default=0) + 1
    touched = {i for e in edges for i in (e["source"], e["target"])}
    if anchor in items:
        touched.add(anchor)
    listed = {i for i in touched if i in items}
    if listed - {anchor}:
        touched = listed

    def rank(identity: str) -> tuple[int, bool, str]:
        item = items.get(identity)
        if identity == anchor:
            return (-1, False, identity)
        return (item["distance"] if item else unplaced, (item or {}).get("kind") in OUTSIDE, identity)

    drawn = sorted(touched, key=rank)[:limit]
    kept = set(drawn)
    return Picture(drawn, [e for e in edges if e["source"] in kept and e["target"] in kept])


def _render(dot: graphviz.Digraph, what: str) -> str:
    """The SVG markup of a graph, without its XML prolog.

    Raises:
        ViewError: LAYOUT_FAILED (503) when graphviz's `dot` is missing or fails.
    """
    try:
        svg = dot.pipe(format="svg", encoding="utf-8")
    except (graphviz.ExecutableNotFound, graphviz.CalledProcessError, OSError) as exc:
        raise ViewError(
            "LAYOUT_FAILED",
            f"graphviz could not lay out {what} ({type(exc).__name__}); "
            "install graphviz (`apt-get install graphviz`) or narrow the relations",
            status=503,
        ) from exc
    return _PROLOG.sub("", svg, count=1)


def slice_svg(
    anchor: str,
    nodes: list[dict[str, Any]],
    picture: Picture,
    *,
    node_url: Callable[[str], str],
    edge_url: Callable[[dict[str, Any]], str],
) -> str:
    """The SVG markup of a slice's picture.

    Parameters:
        anchor: the slice's anchor (drawn filled).
        nodes: the page's node items (`id`, `kind`, `distance`), for the kinds of the drawn nodes.
        picture: what to draw (`nearest`).
        node_url: the link of a node.
        edge_url: the link of an edge (its evidence page).

    Returns:
        `<svg ...>...</svg>`, ready to inline in HTML; empty when the picture is.

    Raises:
        ViewError: LAYOUT_FAILED (503) when graphviz's `dot` is missing or fails.
    """
    if not picture.nodes:
        return ""
    kinds = {n["id"]: n["kind"] for n in nodes}
    names = {identity: f"n{index}" for index, identity in enumerate(picture.nodes)}
    labels = _labels(picture.nodes)
    dot = graphviz.Digraph(
        graph_attr={"rankdir": "LR", "fontname": "Helvetica", "bgcolor": "transparent", "nodesep": "0.12"},
        node_attr={"fontname": "Helvetica", "fontsize": "10", "style": "rounded", "height": "0.28"},
        edge_attr={"fontname": "Helvetica", "fontsize": "8", "arrowsize": "0.6"},
    )
    for index, identity in enumerate(picture.nodes):
        kind = kinds.get(identity)
        style = "rounded,dashed" if kind in OUTSIDE else "rounded"
        attrs = {
            "label": graphviz.escape(labels[identity]),
            "tooltip": graphviz.escape(identity),
            "shape": SHAPES.get(kind or "", "box"),
            "style": ("filled," + style) if identity == anchor else style,
            "fillcolor": "#fff3c4",
            "color": "#9e9e9e" if kind is None else "#37474f",
            "id": f"node-{index}",
            "class": f"kind-{kind or 'elsewhere'}" + (" anchor" if identity == anchor else ""),
            # Pre-escaped: dot copies URLs into the SVG as they are (it keeps existing entities).
            "URL": node_url(identity).replace("&", "&amp;"),
        }
        dot.node(names[identity], **attrs)
    for index, edge in enumerate(picture.edges):
        about = f"{qname(edge['source'])} {edge['relation']} {qname(edge['target'])}"
        # A raise reads apart from the calls beside it, in words as well as in colour.
        raised = edge["relation"] == "raises"
        raises = {"label": "raises", "fontcolor": EDGE_COLOURS["raises"]} if raised else {}
        dot.edge(
            names[edge["source"]],
            names[edge["target"]],
            color=EDGE_COLOURS.get(edge["relation"], "#37474f"),
            style="dashed" if edge.get("status") not in (None, "confirmed") else "solid",
            tooltip=graphviz.escape(f"{about} ({edge.get('resolution')}, {edge.get('status')})"),
            id=f"edge-{index}",
            **{"class": f"rel-{edge['relation']}"},
            **raises,
            URL=edge_url(edge).replace("&", "&amp;"),
        )
    return _render(dot, "this slice's picture")


def module_map_svg(modules: ModuleMap, *, node_url: Callable[[str], str]) -> str:
    """The SVG markup of a workspace's module map: each drawn module a box in its package's frame,
    wider and in larger type the more symbols it holds, and an arrow from a module to each import
    drawn.

    Parameters:
        modules: the map (`slotrelay.psmr.ops.overview.module_map`).
        node_url: the link of a module (its symbol page).

    Returns:
        `<svg ...>...</svg>`; empty when the workspace has no module.

    Raises:
        ViewError: LAYOUT_FAILED (503) when graphviz's `dot` is missing or fails.
    """
    if not modules.modules:
        return ""
    in_package: dict[str, int] = {}
    for module in modules.modules + modules.left_out:
        in_package[module["package"]] = in_package.get(module["package"], 0) + 1
    names = {m["id"]: f"m{index}" for index, m in enumerate(modules.modules)}
    dot = graphviz.Digraph(
        graph_attr={
            "rankdir": "TB",
            "fontname": "Helvetica",
            "bgcolor": "transparent",
            "nodesep": "0.2",
            "ranksep": "0.45",
            # Edges that share an end merge into one line: the map shows structure, not each import.
            "concentrate": "true",
        },
        node_attr={
            "fontname": "Helvetica",
            "shape": "box",
            "style": "rounded,filled",
            "fillcolor": "#e8f0f8",
            "color": "#37474f",
        },
        edge_attr={"color": "#90a4ae", "arrowsize": "0.5"},
    )
    packages: dict[str, list[dict[str, Any]]] = {}
    for module in modules.modules:
        packages.setdefault(module["package"], []).append(module)
    for index, (package, members) in enumerate(sorted(packages.items())):
        with dot.subgraph(name=f"cluster_{index}") as frame:
            shown = f"{len(members)} of {in_package[package]} modules"
            frame.attr(
                label=graphviz.escape(f"{package} ({shown})"),
                id=f"package-{index}",
                style="rounded",
                color="#b0bec5",
                fontname="Helvetica",
                fontsize="12",
            )
            for module in members:
                short = module["name"].removeprefix(package + ".") if module["name"] != package else None
                count = module["symbols"]
                # The name is escaped alone: the `\n` after it is dot's line break, not text.
                plural = "" if count == 1 else "s"
                label = graphviz.nohtml(f"{graphviz.escape(short or '__init__')}\\n{count} symbol{plural}")
                frame.node(
                    names[module["id"]],
                    label=label,
                    tooltip=graphviz.escape(f"{module['name']}: {count} symbols, {module['lines']} lines"),
                    fontsize=f"{9 + 2.5 * math.log10(1 + count):.1f}",
                    width=f"{0.9 + 0.12 * math.sqrt(count):.2f}",
                    id=f"module-{names[module['id']]}",
                    **{"class": "module"},
                    URL=node_url(module["id"]).replace("&", "&amp;"),
                )
    for source, target in modules.imports:
        dot.edge(
            names[source],
            names[target],
            tooltip=graphviz.escape(f"{qname(source)} imports {qname(target)}"),
            **{"class": "imports"},
        )
    return _render(dot, "the module map")
