"""verification.rebuild, verification.roundtrip and verification.review (CONTRACTS.md#running-tests).

rebuild re-imports the projected files into the workspace (the incremental build): W -> W'.
roundtrip compares the delta's intended change with W' - W, W being the before-image projection.apply
kept beside the delta, in three sections: matched, intended_but_missing, changed_but_not_intended.
Call sites that only moved inside their caller (a call's arguments rewritten) are not changes; edges
and call sites leaving a replaced body or an added symbol are what the delta intended for them.
Roundtrip checks the graph against the projection, nothing more: that the analysis of the files as
written (W') differs from W exactly as the delta said it would. `all_matched: true` means the code
says what the delta meant, not that the change is correct; the code's behaviour is what the tests
say, and review reads them.

review reports what the change did beyond its intent: new and resolved confirmed defects, semantic
events (griffe's API breakages, new import or call cycles, new state writes), unexpected changes,
new unknowns and new conflicts; and it reads the latest execution.run_tests recorded for the delta:
a run on the applied files with a failure fails the review (`passed: false`, the failed test ids
listed), as does a new confirmed defect. A review with no run on the applied files says so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import networkx as nx

from slotrelay.psmr.change import delta as deltas
from slotrelay.psmr.change.validation import confirmed_defects
from slotrelay.psmr.errors import InvalidQuery
from slotrelay.psmr.ops.diff import Side, api_breakages, compare, side_from_json, side_of, texts_of
from slotrelay.psmr.ops.queries import Answer
from slotrelay.psmr.workspace.build import artifact_text, build
from slotrelay.psmr.workspace.identity import qname, sid
from slotrelay.psmr.workspace.store import Store, Workspace

if TYPE_CHECKING:
    from slotrelay.psmr.workspace.kept import KeptResolutions

ROUNDTRIP_CHECKS = (
    "the graph of the files as written (W') against the delta's projection: W' - W, W being the "
    "workspace before the apply, matches the change the delta expected. It does not run the code: "
    "all_matched says the code now says what the delta meant, not that the change is correct; "
    "execution.run_tests and verification.review say that"
)


def rebuild(
    ws: Workspace, request: dict[str, Any], store: Store, *, kept: KeptResolutions | None = None
) -> Answer:
    """verification.rebuild: the incremental build of the workspace's root, W -> W' (replaying the
    last resolution `kept` holds of it, see `slotrelay.psmr.workspace.kept`)."""
    delta = deltas.load(store, ws, request["delta_id"]) if request.get("delta_id") else None
    summary = build(ws.root, rev=ws.rev, store=store.path, kept=kept)
    if delta is not None:
        delta["rebuilt"] = {"at": deltas.now(), "version": summary["version"]}
        deltas.save(store, ws, delta)
    return Answer(
        data={
            **summary,
            "previous_version": ws.version,
            "next": "verification.roundtrip and verification.review with the delta_id",
        }
    )


def _applied(
    ws: Workspace, request: dict[str, Any], store: Store, operation: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    delta = deltas.load(store, ws, request["delta_id"])
    if delta["apply"] is None:
        raise InvalidQuery(f"{operation}: delta {delta['delta_id']} was not applied (projection.apply first)")
    if ws.version == delta["workspace_version"]:
        raise InvalidQuery(
            f"{operation}: workspace {ws.workspace_id} is still at the version the delta was proposed on; "
            "call verification.rebuild first"
        )
    image = deltas.load_image(store, ws, delta["delta_id"])
    if not isinstance(image, dict) or not isinstance(image.get("side"), dict):
        raise InvalidQuery(
            f"{operation}: the workspace as it stood before delta {delta['delta_id']} was applied is not in "
            "the store (or not sealed by this user's slotrelay); propose and apply the change again"
        )
    return delta, image


def _before_side(ws: Workspace, delta: dict[str, Any], image: dict[str, Any]) -> Side:
    def read(artifact: str) -> str | None:
        if artifact in delta["files"]:
            original: str | None = delta["files"][artifact]["original"]
            return original
        return artifact_text(ws.source_root, artifact)

    return side_from_json(image["side"], read)


def intended_renames(delta: dict[str, Any]) -> dict[str, str]:
    """The delta's renames, old identity -> new."""
    return {r["old"]: r["new"] for r in delta["expected"]["symbols_renamed"]}


def judge(delta: dict[str, Any], actual: dict[str, list[Any]]) -> dict[str, list[dict[str, Any]]]:
    """Sort W' - W against the delta's intent into matched, intended_but_missing, changed_but_not_intended.

    Parameters:
        delta: the delta record (its `expected` member is read).
        actual: `slotrelay.psmr.ops.diff.compare` of the before-image and W'.

    Returns:
        The three sections, each a list of `{"kind", ...}` items.
    """
    expected = delta["expected"]
    free = set(expected["edges_free"]) | set(expected["symbols_added"])
    verdict = _Verdict()
    _judge_symbols(verdict, delta, actual)
    _judge_call_sites(verdict, expected, actual, free)
    _judge_edges(verdict, delta, actual, free)
    return {
        "matched": verdict.matched,
        "intended_but_missing": verdict.missing,
        "changed_but_not_intended": verdict.unexpected,
    }


@dataclass
class _Verdict:
    """The three sections of a roundtrip, filled kind by kind."""

    matched: list[dict[str, Any]] = field(default_factory=list)
    missing: list[dict[str, Any]] = field(default_factory=list)
    unexpected: list[dict[str, Any]] = field(default_factory=list)

    def sort(self, kind: str, want: set[Any], got: set[Any], show: Callable[[Any], dict[str, Any]]) -> None:
        """What was intended and came, intended and did not, and came unintended, each shown as an item."""
        self.matched.extend({"kind": kind, **show(x)} for x in sorted(want & got))
        self.missing.extend({"kind": kind, **show(x)} for x in sorted(want - got))
        self.unexpected.extend({"kind": kind, **show(x)} for x in sorted(got - want))


def _judge_symbols(verdict: _Verdict, delta: dict[str, Any], actual: dict[str, list[Any]]) -> None:
    expected = delta["expected"]
    verdict.sort(
        "symbol_added",
        set(expected["symbols_added"]),
        {i["id"] for i in actual["symbols_added"]},
        lambda x: {"id": x},
    )
    verdict.sort(
        "symbol_removed",
        set(expected["symbols_removed"]),
        {i["id"] for i in actual["symbols_removed"]},
        lambda x: {"id": x},
    )
    renames = intended_renames(delta)
    got_renamed = {(r["old"], r["new"]) for r in actual["symbols_renamed"]}
    verdict.sort(
        "symbol_renamed",
        # A member moves with its renamed class: that rename is intended too.
        {(o, n) for o, n in renames.items()}
        | {(o, n) for o, n in got_renamed if deltas.renamed_to(renames, o) == n},
        got_renamed,
        lambda x: {"old": x[0], "new": x[1]},
    )
    verdict.sort(
        "symbol_changed",
        {(i["id"], c) for i in expected["symbols_changed"] for c in i["changes"]},
        {(i["id"], c) for i in actual["symbols_changed"] for c in i["changes"]},
        lambda x: {"id": x[0], "change": x[1]},
    )


def _judge_call_sites(
    verdict: _Verdict, expected: dict[str, Any], actual: dict[str, list[Any]], free: set[str]
) -> None:
    """Call sites counted per caller and callee; those inside a replaced body or an added symbol match."""
    for kind, side in (("call_site_added", "call_sites_added"), ("call_site_removed", "call_sites_removed")):
        want = Counter(tuple(pair) for pair in expected[side])
        got = Counter((s["caller"], s["callee"]) for s in actual[side] if s["caller"] not in free)
        verdict.sort(
            kind,
            {(p, n) for p, c in want.items() for n in range(c)},
            {(p, n) for p, c in got.items() for n in range(c)},
            lambda x: {"caller": x[0][0], "callee": x[0][1]},
        )
        verdict.matched.extend(
            {
                "kind": kind,
                "caller": s["caller"],
                "callee": s["callee"],
                "within": "a replaced body or added symbol",
            }
            for s in actual[side]
            if s["caller"] in free
        )


def _judge_edges(
    verdict: _Verdict, delta: dict[str, Any], actual: dict[str, list[Any]], free: set[str]
) -> None:
    """Edges and state accesses: intended when they leave or reach a replaced body or an added symbol."""
    # An import inside a replaced body or an added symbol is an edge of its module.
    free_modules = {
        sid(f["module"])
        for f in delta["files"].values()
        if any(qname(n).startswith(f["module"] + ".") for n in free)
    }
    kinds = {
        "edges_added": "edge_added",
        "edges_removed": "edge_removed",
        "state_accesses_added": "state_access_added",
        "state_accesses_removed": "state_access_removed",
    }
    for name, kind in kinds.items():
        for edge in actual[name]:
            item = {"kind": kind, **edge}
            imports_of_free = edge["relation"] == "imports" and edge["source"] in free_modules
            if edge["source"] in free or edge["target"] in free or imports_of_free:
                verdict.matched.append(item)
            else:
                verdict.unexpected.append(item)


def roundtrip(ws: Workspace, request: dict[str, Any], store: Store) -> Answer:
    """verification.roundtrip: ΔW_intended against W' - W."""
    delta, image = _applied(ws, request, store, "verification.roundtrip")
    actual = compare(_before_side(ws, delta, image), side_of(ws), renames=intended_renames(delta))
    verdict = judge(delta, actual)
    counts = {name: len(items) for name, items in verdict.items()}
    all_matched = not verdict["intended_but_missing"] and not verdict["changed_but_not_intended"]
    delta["roundtrip"] = {
        "at": deltas.now(),
        "version": ws.version,
        "counts": counts,
        "all_matched": all_matched,
    }
    delta["status"] = "verified" if all_matched else "roundtrip_mismatch"
    deltas.save(store, ws, delta)
    return Answer(
        data={
            "delta_id": delta["delta_id"],
            "all_matched": all_matched,
            "checks": ROUNDTRIP_CHECKS,
            "counts": counts,
            "call_sites_moved": len(actual["call_sites_moved"]),
            "version_before": image["side"]["version"],
            "version_after": ws.version,
        },
        sections=list(verdict.items()),
    )


def latest_run(delta: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    """The latest execution.run_tests recorded for an applied delta, if it ran on the files as the
    delta wrote them, with warnings saying why a run is not taken."""
    if not delta["runs"]:
        untested = (
            "no execution.run_tests is recorded for this delta: its behaviour is untested (run the tests "
            "with its delta_id, then review again)"
        )
        return None, [untested]
    run: dict[str, Any] = delta["runs"][-1]
    written = {a: f["projected_sha256"] for a, f in delta["files"].items()}
    if run.get("files") != written:
        stale = (
            f"the latest execution.run_tests of this delta ({run['at']}) did not run on the files as the "
            "delta wrote them (before the apply, or on files changed since): run the tests again"
        )
        return None, [stale]
    return run, []


def _cycles(pairs: list[tuple[str, str]]) -> set[frozenset[str]]:
    graph: nx.DiGraph[str] = nx.DiGraph(pairs)
    return {frozenset(c) for c in nx.strongly_connected_components(graph) if len(c) > 1}


def review(ws: Workspace, request: dict[str, Any], store: Store) -> Answer:
    """verification.review: defects, semantic events, unexpected changes, unknowns and conflicts."""
    delta, image = _applied(ws, request, store, "verification.review")
    before = _before_side(ws, delta, image)
    after_side = side_of(ws)
    actual = compare(before, after_side, renames=intended_renames(delta))
    old_defects, new_defects = _defects(ws, delta)
    events, warnings = _semantic_events(ws, delta, before, after_side, actual)
    sections = [
        ("new_defects", _defect_items(new_defects - old_defects)),
        ("resolved_defects", _defect_items(old_defects - new_defects)),
        ("semantic_events", events),
        ("unexpected_changes", judge(delta, actual)["changed_but_not_intended"]),
        ("new_unknowns", _new_unknowns(ws, delta, image)),
        ("new_conflicts", _new_conflicts(ws, image)),
    ]
    run, untested = latest_run(delta)
    failed_tests = list(run.get("failed", [])) if run else []
    tests = (
        {key: run[key] for key in ("at", "passed", "counts", "failed_total", "tests") if key in run}
        if run
        else None
    )
    sections.insert(0, ("failed_tests", failed_tests))
    counts = {name: len(items) for name, items in sections}
    passed = bool(run is None or (run["passed"] and not failed_tests)) and not counts["new_defects"]
    delta["review"] = {"at": deltas.now(), "version": ws.version, "counts": counts, "passed": passed}
    delta["status"] = "reviewed" if passed else "review_failed"
    deltas.save(store, ws, delta)
    return Answer(
        data={
            "delta_id": delta["delta_id"],
            "passed": passed,
            "tests": tests,
            "counts": counts,
            "version_after": ws.version,
        },
        sections=sections,
        warnings=warnings + untested,
    )


def _defects(
    ws: Workspace, delta: dict[str, Any]
) -> tuple[Counter[tuple[str, str, str]], Counter[tuple[str, str, str]]]:
    """The confirmed defects of the delta's files before the change and as they are now."""
    old_defects: Counter[tuple[str, str, str]] = Counter()
    new_defects: Counter[tuple[str, str, str]] = Counter()
    for artifact, entry in delta["files"].items():
        old_defects += confirmed_defects(entry["original"], artifact)
        new_defects += confirmed_defects(artifact_text(ws.source_root, artifact) or "", artifact)
    return old_defects, new_defects


def _defect_items(found: Counter[tuple[str, str, str]]) -> list[dict[str, Any]]:
    return [{"file": f, "rule": r, "message": m, "count": c} for (f, r, m), c in sorted(found.items())]


def _semantic_events(
    ws: Workspace, delta: dict[str, Any], before: Side, after_side: Side, actual: dict[str, list[Any]]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The API breakages, new import or call cycles and new state writes, with the warnings of the API
    comparison."""
    after = texts_of(ws)
    before_texts = {**after, **{a: entry["original"] for a, entry in delta["files"].items()}}
    breakages, warnings = api_breakages(
        (ws.files, before_texts), (ws.files, after), name=Path(ws.source_root).name
    )
    events: list[dict[str, Any]] = [{"event": "api_breakage", **b} for b in breakages]
    for relation, pairs_of in (
        (
            "imports",
            lambda side: [tuple(k.split("\0")[::2]) for k in side.edges if k.split("\0")[1] == "imports"],
        ),
        ("calls", lambda side: [(s[0], s[1]) for s in side.sites]),
    ):
        for cycle in sorted(_cycles(pairs_of(after_side)) - _cycles(pairs_of(before)), key=sorted):
            events.append({"event": "new_cycle", "relation": relation, "members": sorted(cycle)})
    events += [
        {"event": "new_state_write", **e}
        for e in actual["state_accesses_added"]
        if e["relation"] == "writes_state"
    ]
    return events, warnings


def _new_unknowns(ws: Workspace, delta: dict[str, Any], image: dict[str, Any]) -> list[dict[str, Any]]:
    """The unknowns of the delta's files that the before-image did not have."""
    touched = set(delta["files"])
    renamed = intended_renames(delta)

    def unknown_keys(records: list[dict[str, Any]], *, rename: bool) -> Counter[tuple[str, str, str]]:
        # An unknown inside a renamed function is the same unknown under the function's new name.
        return Counter(
            (deltas.renamed_to(renamed, u["scope"]) if rename else u["scope"], u["reason"], u["detail"])
            for u in records
            if u["artifact"] in touched
        )

    fresh = unknown_keys(list(ws.unknowns.values()), rename=False) - unknown_keys(
        image["unknowns"], rename=True
    )
    return [
        u for u in sorted(ws.unknowns.values(), key=lambda u: u["id"])
        if (u["scope"], u["reason"], u["detail"]) in fresh
    ]  # fmt: skip


def _new_conflicts(ws: Workspace, image: dict[str, Any]) -> list[dict[str, Any]]:
    old_conflicts = {c["id"] for c in image["conflicts"]}
    return [c for c in sorted(ws.conflicts.values(), key=lambda c: c["id"]) if c["id"] not in old_conflicts]
