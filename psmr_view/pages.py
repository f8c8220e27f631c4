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

from psmr_view.errors import ViewError
from psmr_view.graph_svg import EDGE_COLOURS, slice_svg
from psmr_view.links import SYMBOL_RELATIONS, Links
from psmr_view.paging import BUDGETS, Pager, PageRef, pager
from psmr_view.reader import WorkspaceReader, list_workspaces
from psmr_view.source import excerpt
from slotrelay.psmr import api
from slotrelay.psmr.errors import PsmrError
from slotrelay.psmr.operators import FINDING_KINDS, RELATIONS, SEARCH_KINDS

Page = tuple[str, dict[str, Any]]
DELTA_ID = re.compile(r"dl_[0-9a-f]+")
CONTRACT_KINDS = frozenset({"function", "method", "class", "lambda", "test"})
SYMBOL_DEPTHS = (1, 2)


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


def overview(req: PageRequest) -> Page:
    """workspace.describe, findings by kind, unknowns by reason and the first conflicts."""
    described = req.reader.call("workspace.describe", {}, budget={"max_nodes": 1})["data"]
    findings = req.reader.call("analysis.findings", {}, budget={"max_nodes": 1})["data"]["counts"]
    unknowns = req.reader.call("query.unknowns", {}, budget={"max_nodes": 1})["data"]
    conflicts = req.reader.call("query.conflicts", {}, budget=BUDGETS["touching"])
    proposed = req.reader.call("delta.list", {}, budget={"max_nodes": 1})["data"]
    return "overview.html", {
        "deltas": proposed,
        "described": described,
        "findings": {kind: findings.get(kind, 0) for kind in FINDING_KINDS},
        "unknowns_by_reason": unknowns["by_reason"],
        "unknown_total": unknowns["total"],
        "conflicts": conflicts["data"]["conflicts"],
        "conflict_total": conflicts["data"]["total"],
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


def symbol(req: PageRequest) -> Page:
    """The slice around a symbol as a picture and tables; on page 1 also its contracts and the
    unknowns and conflicts touching it."""
    identity = req.required("id", "a semantic identity or dotted name, e.g. pkg.mod.func")
    depth = req.whole("depth", 1, SYMBOL_DEPTHS)
    relations = _relations(req)
    answer = req.reader.call(
        "query.subgraph",
        {"anchor": {"kind": "symbol", "value": identity}, "depth": depth, "relations": relations},
        budget=BUDGETS["symbol"],
        page=req.page,
    )
    data = answer["data"]
    anchor = data["anchor"]
    links = req.links
    svg = slice_svg(
        anchor,
        data["nodes"],
        data["edges"],
        node_url=lambda node: links.symbol(node, depth, relations),
        edge_url=lambda edge: links.evidence(edge["evidence_refs"], edge),
    )
    context: dict[str, Any] = {
        "anchor": anchor,
        "depth": depth,
        "depths": SYMBOL_DEPTHS,
        "relations": relations,
        "all_relations": RELATIONS,
        "slice": data,
        "svg": svg,
        "edge_colours": EDGE_COLOURS,
        "pager": req.pager(answer),
        "node": None,
    }
    if req.page.number == 1:
        node = next(n for n in data["nodes"] if n["id"] == anchor)
        context["node"] = node
        if node["kind"] in CONTRACT_KINDS:
            contracts = req.reader.call(
                "analysis.contracts", {"target": anchor, "accept_conflicts": True}, budget=BUDGETS["touching"]
            )
            context["contracts"] = contracts["data"]
        touching = req.reader.call("query.unknowns", {"scope": anchor}, budget=BUDGETS["touching"])
        context["touching_unknowns"] = touching["data"]
        context["touching_conflicts"] = req.reader.call(
            "query.conflicts", {"subject": anchor}, budget=BUDGETS["touching"]
        )["data"]
    return "symbol.html", context


def evidence(req: PageRequest) -> Page:
    """query.evidence for an edge's evidence ids, each with its source lines marked."""
    ids = [i for i in req.params.getlist("id") if i.strip()]
    if not ids:
        raise ViewError("INVALID_QUERY", "parameter 'id' is missing: give one or more evidence ids (ev_...)")
    answer = req.reader.call(
        "query.evidence", {"evidence_ids": ids}, budget=BUDGETS["evidence"], page=req.page
    )
    records = [
        {
            "record": r,
            "excerpt": excerpt(
                req.reader.source_root, req.reader.manifest["files"], r["artifact"], r["span"]
            ),
        }
        for r in answer["data"]["evidence"]
    ]
    return "evidence.html", {"edge": req.params.get("edge"), "records": records, "pager": req.pager(answer)}


def source(req: PageRequest) -> Page:
    """A file's lines around one line of it (where an unknown, conflict or finding points)."""
    artifact = req.required("artifact", "a file of the workspace, relative to its root")
    line = req.whole("line", 1, range(1, 10**7))
    found = excerpt(
        req.reader.source_root,
        req.reader.manifest["files"],
        artifact,
        {"line": line, "end_line": line},
        context=12,
    )
    return "source.html", {"excerpt": found, "line": line}


def impact(req: PageRequest) -> Page:
    """analysis.impact with direct, derived and runtime certainty in separate columns."""
    identity = req.required("id", "the symbol whose change to analyse")
    accept = req.params.get("accept_conflicts") == "1"
    depth = req.whole("depth", 3, range(1, 11))
    try:
        answer = req.reader.call(
            "analysis.impact",
            {"target": identity, "depth": depth, "accept_conflicts": accept},
            budget=BUDGETS["impact"],
            page=req.page,
        )
    except ViewError as refused:
        if refused.code == "CONFLICT_REQUIRES_REVIEW":
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
    """query.conflicts, optionally about one subject."""
    request = {"subject": req.params["subject"]} if req.params.get("subject") else {}
    answer = req.reader.call("query.conflicts", request, budget=BUDGETS["conflicts"], page=req.page)
    return "conflicts.html", {"filters": request, "conflicts": answer["data"], "pager": req.pager(answer)}


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
            "INVALID_QUERY", "compare with another workspace (against) or two workspaces (workspace_a and "
            "workspace_b), not both"
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
