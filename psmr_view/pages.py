"""What each page shows, from the operators' answers: overview, search, symbol, evidence, source,
impact, unknowns, conflicts, findings, semantic diff, and the proposed deltas.

Each builder takes a `PageRequest` and returns the template and its context. Lists come one budgeted
page of the operator's answer at a time (`paging.BUDGETS`), with links to the next page.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.datastructures import QueryParams

from psmr_view import sites
from psmr_view.errors import ViewError
from psmr_view.graph_svg import EDGE_COLOURS, MAX_DRAWN, module_map_svg, nearest, slice_svg
from psmr_view.links import SYMBOL_RELATIONS, Links
from psmr_view.paging import BUDGETS, Pager, PageRef, pager
from psmr_view.reader import WorkspaceReader, list_workspaces
from psmr_view.source import excerpt
from slotrelay.psmr import api
from slotrelay.psmr.errors import PsmrError
from slotrelay.psmr.operators import FINDING_KINDS, OPERATIONS, RELATIONS, SEARCH_KINDS
from slotrelay.psmr.ops import overview as orientation
from slotrelay.psmr.workspace.store import Store

Page = tuple[str, dict[str, Any]]
DELTA_ID = re.compile(r"dl_[0-9a-f]+")
CONTRACT_KINDS = frozenset({"function", "method", "class", "lambda", "test"})
SYMBOL_DEPTHS = (1, 2)
# The source page's context, in the steps "more context" takes: at most 200 lines either side.
SOURCE_CONTEXTS = (12, 25, 50, 100, 200)
# Kinds a raise cannot construct: a `calls` edge to one of these is a call, whatever its line says.
NOT_RAISED = frozenset({"function", "method", "lambda", "test", "module", "state"})
# The overview's conflicts: the first this many, overload groups left out, of the first page read.
OVERVIEW_CONFLICTS = 10
# How many evidence ids one query.evidence request takes: its schema's limit
# (docs/mcp.md#request-size-limits).
EVIDENCE_IDS_LIMIT: int = OPERATIONS["query.evidence"]["input_schema"]["properties"]["evidence_ids"][
    "maxItems"
]


@dataclass
class PageRequest:
    """One request for a page about a workspace."""

    reader: WorkspaceReader
    params: QueryParams
    page: PageRef
    path: str

    @property
    def links(self) -> Links:
        return Links(self.reader.workspace_id)

    def pager(self, answer: dict[str, Any]) -> Pager:
        return pager(self.path, self.params, self.page, answer, self.reader.version)

    def required(self, name: str, what: str) -> str:
        """A query parameter the page cannot do without.

        Raises:
            ViewError: INVALID_QUERY naming the parameter.
        """
        value = (self.params.get(name) or "").strip()
        if not value:
            raise ViewError("INVALID_QUERY", f"parameter {name!r} is missing: give {what}")
        return value

    def whole(self, name: str, default: int, allowed: range | tuple[int, ...]) -> int:
        """A whole-number query parameter within `allowed`.

        Raises:
            ViewError: INVALID_QUERY naming the parameter and what it takes.
        """
        text = self.params.get(name, str(default))
        if not (text.isascii() and text.isdigit()) or int(text) not in allowed:
            shown = (
                ", ".join(map(str, allowed)) if isinstance(allowed, tuple) else f"{allowed[0]}..{allowed[-1]}"
            )
            raise ViewError("INVALID_QUERY", f"parameter {name!r} takes {shown}, got {text!r}")
        return int(text)


def workspaces(store: Path) -> Page:
    """The workspaces of the store."""
    return "workspaces.html", {"store": str(store), "workspaces": list_workspaces(store)}


def _records(req: PageRequest, ids: list[str]) -> dict[str, dict[str, Any]]:
    """The evidence records of `ids`, by id: query.evidence asked for at most as many ids as its
    request takes (`EVIDENCE_IDS_LIMIT`) at a time, each answer read page by page."""
    records: dict[str, dict[str, Any]] = {}
    wanted = list(dict.fromkeys(ids))
    for start in range(0, len(wanted), EVIDENCE_IDS_LIMIT):
        chunk = wanted[start : start + EVIDENCE_IDS_LIMIT]
        page: PageRef | None = None
        while True:
            answer = req.reader.call(
                "query.evidence", {"evidence_ids": chunk}, budget=BUDGETS["sites"], page=page
            )
            records |= {r["id"]: r for r in answer["data"]["evidence"]}
            token = (answer.get("continuation") or {}).get("continuation_token")
            if token is None:
                break
            page = PageRef(2, token)
    return records


def _overload_groups(req: PageRequest, conflicts: list[dict[str, Any]]) -> set[str]:
    """The ids of the conflicts that are `@overload` stubs and their implementation (`sites`)."""
    duplicates = [c for c in conflicts if c["kind"] == "duplicate_definition" and c["evidence_refs"]]
    if not duplicates:
        return set()
    records = _records(req, [ref for c in duplicates for ref in c["evidence_refs"]])
    return {c["id"] for c in duplicates if sites.overload_group(req.reader.files, c, records)}


def overview(req: PageRequest) -> Page:
    """What to read first (`slotrelay.psmr.ops.overview`: the module map, entry points, busiest symbols,
    findings worth reading first), the open conflicts, then workspace.describe's counts."""
    described = req.reader.call("workspace.describe", {}, budget={"max_nodes": 1})["data"]
    unknowns = req.reader.call("query.unknowns", {}, budget={"max_nodes": 1})["data"]
    conflicts = req.reader.call("query.conflicts", {}, budget=BUDGETS["conflicts"])
    proposed = req.reader.call("delta.list", {}, budget={"max_nodes": 1})["data"]
    oriented = orientation.orient(req.reader.workspace(), Store.open(req.reader.store))
    listed = conflicts["data"]["conflicts"]
    overloads = _overload_groups(req, listed)
    real = [c for c in listed if c["id"] not in overloads]
    return "overview.html", {
        "deltas": proposed,
        "described": described,
        "oriented": oriented,
        "module_map": module_map_svg(oriented.modules, node_url=req.links.symbol),
        "findings": {kind: oriented.finding_counts.get(kind, 0) for kind in FINDING_KINDS},
        "unknowns_by_reason": unknowns["by_reason"],
        "unknown_total": unknowns["total"],
        "conflicts": real[:OVERVIEW_CONFLICTS],
        "conflict_total": conflicts["data"]["total"] - len(overloads),
        "overloads": len(overloads),
        "conflicts_read": len(listed),
    }


def search(req: PageRequest) -> Page:
    """query.search: matches by semantic identity, with kind and file."""
    text = req.params.get("q")
    kind = req.params.get("kind") or "symbol"
    context: dict[str, Any] = {"text": text or "", "kind": kind, "kinds": SEARCH_KINDS, "matches": None}
    if text is not None:
        answer = req.reader.call(
            "query.search", {"text": text, "kind": kind}, budget=BUDGETS["search"], page=req.page
        )
        context |= {
            "matches": answer["data"]["matches"],
            "total": answer["data"]["total"],
            "pager": req.pager(answer),
        }
    return "search.html", context


def _relations(req: PageRequest) -> list[str]:
    chosen = req.params.getlist("rel") or list(SYMBOL_RELATIONS)
    unknown = sorted(set(chosen) - set(RELATIONS))
    if unknown:
        raise ViewError(
            "INVALID_QUERY", f"relation {', '.join(unknown)} is not one of {', '.join(RELATIONS)}"
        )
    return chosen


def _shown_relations(
    req: PageRequest, edges: list[dict[str, Any]], kinds: dict[str, str]
) -> list[dict[str, Any]]:
    """The edges as a person reads them: a `calls` edge whose every site is the exception of a
    `raise` is `raises` (`sites.in_raise`); the relation the store holds stays in `stored`."""
    candidates = [e for e in edges if e["relation"] == "calls" and kinds.get(e["target"]) not in NOT_RAISED]
    records = _records(req, [ref for e in candidates for ref in e["evidence_refs"]]) if candidates else {}
    raised = {
        id(e)
        for e in candidates
        if all(
            ref in records and sites.in_raise(req.reader.files, records[ref]) for ref in e["evidence_refs"]
        )
    }
    return [{**e, "relation": "raises", "stored": "calls"} if id(e) in raised else e for e in edges]


def _overloads(req: PageRequest, anchor: str, node: dict[str, Any]) -> sites.Definitions | None:
    """The anchor's definitions when it is `@overload` stubs and one implementation, else None.

    Read for a function or method defined more than once: the `defines` edge into it holds one
    evidence record per `def`. Whether the store made the implementation the symbol (`@overload`,
    `typing.overload`) or kept the first stub under a duplicate_definition conflict (an alias such
    as `t.overload`), the page names the stubs and opens on the implementation alike.
    """
    if node["kind"] not in ("function", "method"):
        return None
    defined = req.reader.call(
        "query.subgraph",
        {"anchor": {"kind": "symbol", "value": anchor}, "depth": 1, "relations": ["defined_by"]},
        budget=BUDGETS["touching"],
    )["data"]["edges"]
    refs = [ref for e in defined if e["target"] == anchor for ref in e["evidence_refs"]]
    if len(refs) < 2:
        return None
    found = sites.definitions(req.reader.files, list(_records(req, refs).values()))
    return found if found.implementation is not None else None


def symbol(req: PageRequest) -> Page:
    """The slice around a symbol: on page 1 a picture of its nearest neighbours (`graph_svg.nearest`),
    its contracts (an `@overload`ed function's from its implementation) and the unknowns and conflicts
    touching it; on every page its edges and neighbours as tables, a `raise` listed as `raises`."""
    identity = req.required("id", "a semantic identity or dotted name, e.g. pkg.mod.func")
    depth = req.whole("depth", 1, SYMBOL_DEPTHS)
    relations = _relations(req)
    slice_request = {"anchor": {"kind": "symbol", "value": identity}, "depth": depth, "relations": relations}
    answer = req.reader.call("query.subgraph", slice_request, budget=BUDGETS["symbol"], page=req.page)
    data = answer["data"]
    anchor = data["anchor"]
    links = req.links
    kinds = {n["id"]: n["kind"] for n in data["nodes"]}
    edges = _shown_relations(req, data["edges"], kinds)
    overloads = _overload_groups(req, data["conflicts"])
    context: dict[str, Any] = {
        "anchor": anchor,
        "depth": depth,
        "depths": SYMBOL_DEPTHS,
        "relations": relations,
        "all_relations": RELATIONS,
        "slice": data,
        "edges": edges,
        "slice_conflicts": [c for c in data["conflicts"] if c["id"] not in overloads],
        "svg": "",
        "drawn": set(),
        "left_out": 0,
        "node_total": data["paging"]["nodes"]["total"],
        "edge_colours": EDGE_COLOURS,
        "pager": req.pager(answer),
        "node": None,
        "implementation": None,
    }
    if req.page.number > 1:
        return "symbol.html", context
    # Nearest first, a node comes after every edge among nearer ones: a page holds all the edges among
    # its nodes. When this page's edges crowd out its nodes (a class called from everywhere), the
    # picture gets a page of its own, cut at MAX_DRAWN nodes.
    near, near_edges = data, edges
    if answer.get("continuation") and len(data["nodes"]) < MAX_DRAWN:
        near = req.reader.call("query.subgraph", slice_request, budget=BUDGETS["picture"])["data"]
        near_edges = _shown_relations(req, near["edges"], {n["id"]: n["kind"] for n in near["nodes"]})
    picture = nearest(anchor, near["nodes"], near_edges)
    context["svg"] = slice_svg(
        anchor,
        near["nodes"],
        picture,
        node_url=lambda node: links.symbol(node, depth, relations),
        edge_url=lambda edge: links.evidence(edge["evidence_refs"], edge),
    )
    context["drawn"] = set(picture.nodes)
    context["left_out"] = context["node_total"] - len(picture.nodes)
    context["neighbours"] = links.neighbours(anchor, depth, relations)
    node = next(n for n in data["nodes"] if n["id"] == anchor)
    context["node"] = node
    contracts = None
    if node["kind"] in CONTRACT_KINDS:
        contracts = req.reader.call(
            "analysis.contracts", {"target": anchor, "accept_conflicts": True}, budget=BUDGETS["touching"]
        )["data"]
    touching = req.reader.call("query.unknowns", {"scope": anchor}, budget=BUDGETS["touching"])
    context["touching_unknowns"] = touching["data"]
    touching_conflicts = req.reader.call("query.conflicts", {"subject": anchor}, budget=BUDGETS["touching"])[
        "data"
    ]
    definitions = _overloads(req, anchor, node)
    if definitions is not None and definitions.implementation is not None:
        defined = definitions.implementation
        context["implementation"] = sites.implementation(req.reader.files, defined.artifact, defined.line)
        context["stubs"] = definitions.stubs
        grouped = {d.evidence for d in definitions.items}
        kept = [
            c
            for c in touching_conflicts["conflicts"]
            if not (c["kind"] == "duplicate_definition" and set(c["evidence_refs"]) <= grouped)
        ]
        touching_conflicts = {
            **touching_conflicts,
            "conflicts": kept,
            "total": touching_conflicts["total"] - (len(touching_conflicts["conflicts"]) - len(kept)),
        }
    context["contracts"] = contracts
    context["touching_conflicts"] = touching_conflicts
    return "symbol.html", context


def neighbours(req: PageRequest) -> Page:
    """The nodes of a symbol's slice, nearest first, a page at a time: the list behind its picture,
    whose first nodes (at most `graph_svg.MAX_DRAWN`) are the ones drawn."""
    identity = req.required("id", "a semantic identity or dotted name, e.g. pkg.mod.func")
    depth = req.whole("depth", 1, SYMBOL_DEPTHS)
    relations = _relations(req)
    answer = req.reader.call(
        "query.subgraph",
        {"anchor": {"kind": "symbol", "value": identity}, "depth": depth, "relations": relations},
        budget=BUDGETS["neighbours"],
        page=req.page,
    )
    data = answer["data"]
    return "neighbours.html", {
        "anchor": data["anchor"],
        "depth": depth,
        "relations": relations,
        "nodes": data["nodes"],
        "total": data["paging"]["nodes"]["total"],
        "offset": data["paging"]["nodes"]["offset"],
        "max_drawn": MAX_DRAWN,
        "pager": req.pager(answer),
    }


def evidence(req: PageRequest) -> Page:
    """query.evidence for an edge's evidence ids, each with its source lines marked; a site that is the
    exception of a `raise` says so (`sites.in_raise`)."""
    ids = [i for i in req.params.getlist("id") if i.strip()]
    if not ids:
        raise ViewError("INVALID_QUERY", "parameter 'id' is missing: give one or more evidence ids (ev_...)")
    answer = req.reader.call(
        "query.evidence", {"evidence_ids": ids}, budget=BUDGETS["evidence"], page=req.page
    )
    records = [
        {
            "record": r,
            "about": _about(req, r),
            "excerpt": excerpt(req.reader.files, r["artifact"], r["span"]),
        }
        for r in answer["data"]["evidence"]
    ]
    return "evidence.html", {"edge": req.params.get("edge"), "records": records, "pager": req.pager(answer)}


def _about(req: PageRequest, record: dict[str, Any]) -> str:
    """What an evidence record is about, as a person reads it: "A raises B" for a raise's exception."""
    about = str(record["about"])
    if " calls " in about and sites.in_raise(req.reader.files, record):
        return about.removesuffix(sites.IMPLICIT_RAISE).replace(" calls ", " raises ", 1)
    return about


def source(req: PageRequest) -> Page:
    """A file's lines around one line of it (where an unknown, conflict or finding points), with more
    context a step at a time (`SOURCE_CONTEXTS`)."""
    artifact = req.required("artifact", "a file of the workspace, relative to its root")
    line = req.whole("line", 1, range(1, 10**7))
    context = req.whole("context", SOURCE_CONTEXTS[0], SOURCE_CONTEXTS)
    found = excerpt(req.reader.files, artifact, {"line": line, "end_line": line}, context=context)
    step = SOURCE_CONTEXTS.index(context)
    wider = SOURCE_CONTEXTS[step + 1] if step + 1 < len(SOURCE_CONTEXTS) else None
    narrower = SOURCE_CONTEXTS[step - 1] if step else None
    return "source.html", {
        "excerpt": found,
        "line": line,
        "context": context,
        "more": req.links.source(artifact, line, wider) if wider and (found.before or found.after) else None,
        "less": req.links.source(artifact, line, narrower) if narrower else None,
    }


def impact(req: PageRequest) -> Page:
    """analysis.impact with direct, derived and runtime certainty in separate columns. A symbol whose
    only conflicts are `@overload` stubs and their implementation is one function: analysed as one."""
    identity = req.required("id", "the symbol whose change to analyse")
    accept = req.params.get("accept_conflicts") == "1"
    depth = req.whole("depth", 3, range(1, 11))

    def analyse(accepted: bool) -> dict[str, Any]:
        return req.reader.call(
            "analysis.impact",
            {"target": identity, "depth": depth, "accept_conflicts": accepted},
            budget=BUDGETS["impact"],
            page=req.page,
        )

    try:
        answer = analyse(accept)
    except ViewError as refused:
        if refused.code != "CONFLICT_REQUIRES_REVIEW":
            raise
        touching = req.reader.call("query.conflicts", {"subject": identity}, budget=BUDGETS["conflicts"])
        listed = touching["data"]["conflicts"]
        if listed and len(_overload_groups(req, listed)) == len(listed) == touching["data"]["total"]:
            answer = analyse(True)
        else:
            refused.links = [
                ("review the conflicts", req.links.conflicts(identity)),
                ("analyse anyway, over every definition", req.links.impact(identity, accept_conflicts=True)),
            ]
            raise
    return "impact.html", {"impact": answer["data"], "depth": depth, "pager": req.pager(answer)}


def unknowns(req: PageRequest) -> Page:
    """query.unknowns, optionally around a symbol or of one reason, with counts by reason."""
    request = {k: req.params[k] for k in ("scope", "reason") if req.params.get(k)}
    answer = req.reader.call("query.unknowns", request, budget=BUDGETS["unknowns"], page=req.page)
    return "unknowns.html", {"filters": request, "unknowns": answer["data"], "pager": req.pager(answer)}


def conflicts(req: PageRequest) -> Page:
    """query.conflicts, optionally about one subject; `@overload` stubs with their implementation are
    one function, not a conflict, and are counted apart."""
    request = {"subject": req.params["subject"]} if req.params.get("subject") else {}
    answer = req.reader.call("query.conflicts", request, budget=BUDGETS["conflicts"], page=req.page)
    listed = answer["data"]["conflicts"]
    overloads = _overload_groups(req, listed)
    return "conflicts.html", {
        "filters": request,
        "conflicts": {**answer["data"], "conflicts": [c for c in listed if c["id"] not in overloads]},
        "overloads": len(overloads),
        "pager": req.pager(answer),
    }


def findings(req: PageRequest) -> Page:
    """analysis.findings: confirmed defects, anomalies and hotspots, each in its own table."""
    kind = req.params.get("kind") or None
    request = {"kind": kind} if kind else {}
    answer = req.reader.call("analysis.findings", request, budget=BUDGETS["findings"], page=req.page)
    shown = [k for k in FINDING_KINDS if k in answer["data"]]
    return "findings.html", {
        "kind": kind,
        "kinds": FINDING_KINDS,
        "shown": shown,
        "findings": answer["data"],
        "pager": req.pager(answer),
    }


def diff(req: PageRequest) -> Page:
    """analysis.semantic_diff against another workspace of the store, or between two of them (the two
    revisions `compare_revisions` built). Git revisions typed in the form only fill it in: building
    them changes the store, which a GET never does."""
    against = req.params.get("against") or None
    first, second = req.params.get("workspace_a") or None, req.params.get("workspace_b") or None
    others = [w for w in list_workspaces(req.reader.store) if w["workspace_id"] != req.reader.workspace_id]
    context: dict[str, Any] = {
        "others": others,
        "against": against,
        "rev_a": req.params.get("rev_a", ""),
        "rev_b": req.params.get("rev_b", ""),
        "diff": None,
    }
    if against and (first or second):
        raise ViewError(
            "INVALID_QUERY",
            "compare with another workspace (against) or two workspaces (workspace_a and "
            "workspace_b), not both",
        )
    if bool(first) != bool(second):
        raise ViewError(
            "INVALID_QUERY", "a diff between two workspaces needs both workspace_a and workspace_b"
        )
    if against:
        request = {"workspace_a": req.reader.workspace_id, "workspace_b": against}
    elif first and second:
        request = {"workspace_a": first, "workspace_b": second}
    else:
        return "diff.html", context
    answer = req.reader.call("analysis.semantic_diff", request, budget=BUDGETS["diff"], page=req.page)
    context |= {"diff": answer["data"], "warnings": answer["warnings"], "pager": req.pager(answer)}
    return "diff.html", context


def compare_revisions(reader: WorkspaceReader, form: Mapping[str, str]) -> str:
    """Build the workspaces of two git revisions of the workspace's root, and the URL of their diff.

    The view's one change to the store (a git worktree per revision in the store, and their
    workspaces): asked for by a POST from the diff page's form, whose Origin the guard checks.

    Parameters:
        reader: the workspace whose root's revisions to compare.
        form: the form's fields, `rev_a` and `rev_b`.

    Returns:
        The diff page of the two built workspaces (the POST's redirect).

    Raises:
        ViewError: INVALID_QUERY for a missing revision or one that reads as an option (-x),
            EXECUTION_FAILED (422) for one git does not know.
    """
    revisions = [form.get(name, "").strip() for name in ("rev_a", "rev_b")]
    if not all(revisions):
        raise ViewError("INVALID_QUERY", "a diff between revisions needs both rev_a and rev_b")
    if any(rev.startswith("-") for rev in revisions):
        raise ViewError(
            "INVALID_QUERY", "a git revision does not start with '-'; give a commit, tag or branch"
        )
    built = []
    for rev in revisions:
        try:
            summary = api.build_workspace(reader.manifest["root"], rev=rev, store=reader.store)
        except PsmrError as exc:
            raise ViewError(exc.code, exc.message) from exc
        built.append(summary["workspace_id"])
    return Links(reader.workspace_id).diff(workspace_a=built[0], workspace_b=built[1])


def deltas(req: PageRequest) -> Page:
    """delta.list: every delta proposed for the workspace, with its version, staleness and recorded
    validation."""
    answer = req.reader.call("delta.list", {}, budget=BUDGETS["deltas"], page=req.page)
    return "deltas.html", {
        "listed": answer["data"],
        "warnings": answer["warnings"],
        "pager": req.pager(answer),
    }


def delta(req: PageRequest) -> Page:
    """delta.describe: one delta's edits, expected change, recorded validation and diff per file.

    The page only reads what is recorded: validation results are the ones delta.validate stored, and
    nothing here applies, validates or previews (those stay an agent's or the CLI's acts).
    """
    delta_id = req.required("id", "a delta id (dl_...) from the deltas page")
    if not DELTA_ID.fullmatch(delta_id):
        raise ViewError(
            "OBJECT_NOT_FOUND", f"{delta_id!r} is not a delta id (dl_ and hex digits); see the deltas page"
        )
    answer = req.reader.call("delta.describe", {"delta_id": delta_id}, budget=BUDGETS["delta"], page=req.page)
    data = answer["data"]
    return "delta.html", {
        "delta": data,
        "diffs": [{**d, "lines": diff_lines(d["diff"])} for d in data["diffs"]],
        "warnings": answer["warnings"],
        "pager": req.pager(answer),
    }


def diff_lines(text: str) -> list[tuple[str, str]]:
    """A unified diff's lines, each with its class: `meta` (the file names before the first hunk),
    `hunk`, `add`, `del`, `note` (no newline at end of file) or `ctx`."""
    lines, in_hunks = [], False
    for line in text.splitlines():
        if line.startswith("@@"):
            kind, in_hunks = "hunk", True
        elif not in_hunks:
            kind = "meta"
        else:
            kind = {"+": "add", "-": "del", "\\": "note"}.get(line[:1], "ctx")
        lines.append((kind, line))
    return lines
