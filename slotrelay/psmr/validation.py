"""delta.validate: apply a delta in memory, re-extract the touched files, check the result.

The rule: CONTRACTS.md#changes-go-through-a-delta.

The projected workspace W~ is assembled like a build, from the stored facts of untouched files and
fresh facts of the projected ones, without writing anything. Six checks, each with its own result:

- projection_feasibility: every file still has the hash the delta was proposed on (otherwise the
  answer is CONFLICT_REQUIRES_REVIEW, since nothing else can be judged on a moved base);
- type_compatibility: every call site of a changed signature binds to it in W~, and none was left as
  written because an argument had no new parameter to go to;
- graph_invariants: no call left naming a removed or renamed symbol, no new unresolved import;
- contracts: no dropped parameter still named by a docstring or assert, no suggested test gone;
- impact_boundary: symbols changed in W~ - W lie within the scope, its impact radius or the intent;
- known_defects: no new confirmed finding (pyflakes) in a touched file.

A delta failing any check answers VALIDATION_FAILED with every check in the envelope's `data`.
"""

from __future__ import annotations

import difflib
import hashlib
from collections import Counter
from pathlib import Path
from typing import Any

from slotrelay.psmr import delta as deltas
from slotrelay.psmr.build import NotSource, Unanalysable, artifact_text, file_size_limit, read_source
from slotrelay.psmr.callbinding import BindError, Unbindable, bind, params_of, parse_parameters
from slotrelay.psmr.diff import compare, side_of
from slotrelay.psmr.errors import ConflictRequiresReview, ValidationFailed
from slotrelay.psmr.extract import extract
from slotrelay.psmr.findings import DEFECTS, _check_file
from slotrelay.psmr.graph import GraphAssembler, qname
from slotrelay.psmr.importgraph import import_edges
from slotrelay.psmr.link import Linker
from slotrelay.psmr.queries import Answer
from slotrelay.psmr.rewrite import calls_at, char_column
from slotrelay.psmr.slicing import walk, within
from slotrelay.psmr.store import Store, Workspace

IMPACT_DEPTH = 3
SHOWN = 25
IMPORT_REASONS = frozenset({"external_module", "unresolved_name", "dynamic_import"})


def project(ws: Workspace, store: Store, texts: dict[str, str]) -> Workspace:
    """The workspace W~ the texts would give, assembled in memory (nothing is stored).

    Parameters:
        ws: the workspace W.
        store: its store (for the cached facts of the files left as they are).
        texts: artifact -> projected text.

    Returns:
        A workspace with version `projected`.
    """
    root = Path(ws.source_root).resolve()
    limit = file_size_limit(None)
    facts: dict[str, dict[str, Any]] = {}
    paths: dict[str, str] = {}
    sources: dict[str, str] = {}
    for artifact, entry in ws.files.items():
        text = texts.get(artifact)
        if text is None:
            # Read as the build reads (regular files inside the root only), for grimp's copy too.
            try:
                text = read_source(root, root / artifact, limit=limit).decode("utf-8", errors="replace")
            except (NotSource, Unanalysable):
                text = ""
        cached = None if artifact in texts else store.get_facts(entry["key"])
        if cached is None:
            cached = extract(text, entry["module"], is_package=artifact.endswith("__init__.py"))
        facts[entry["module"]] = cached
        paths[entry["module"]] = artifact
        sources[artifact] = "" if cached.get("syntax_error") else text
    link = Linker(facts).run()
    edges, _ = import_edges(root, facts, sources, store=store)
    assembly = GraphAssembler(facts, paths, ws.commit).build(link, edges)
    files = {
        a: {**e, "sha256": hashlib.sha256(texts[a].encode()).hexdigest()} if a in texts else e
        for a, e in ws.files.items()
    }
    return Workspace(
        workspace_id=ws.workspace_id,
        root=ws.root,
        source_root=ws.source_root,
        rev=ws.rev,
        commit=ws.commit,
        version="projected",
        files=files,
        graph=assembly.graph(),
        evidence=assembly.evidence,
        unknowns=assembly.unknowns,
        conflicts=assembly.conflicts,
    )


def _check(name: str, problems: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "check": name,
        "ok": not problems,
        "problems": problems[:SHOWN],
        "problem_count": len(problems),
        **extra,
    }


def _parameters(data: dict[str, Any]) -> list[Any]:
    bound_first = data["kind"] == "method" and "staticmethod" not in (data.get("decorators") or [])
    return params_of(parse_parameters(data["signature"])[0], bound_first=bound_first)


def _line_map(before: str, after: str) -> dict[int, int]:
    """Original line -> projected line, for the lines an edit kept, replaced one for one, or began a
    replacement at (a call rewritten over fewer or more lines starts where it started)."""
    out: dict[int, int] = {}
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            out.update({i1 + k + 1: j1 + k + 1 for k in range(i2 - i1)})
        elif tag == "replace":
            out[i1 + 1] = j1 + 1
    return out


# A call site to check: where it is reported, the parameters it must bind to, the signature as text, and
# whether the analysis resolved it to the changed symbol (or only its name matches).
Site = tuple[dict[str, Any], list[Any], str, bool]


def _calls_of(ws: Workspace, node: str) -> list[tuple[str, str]]:
    """(caller, evidence id) of every call site of a node."""
    return [
        (caller, ev)
        for caller, _, key, edge in ws.graph.in_edges(node, keys=True, data=True)
        if key == "calls"
        for ev in edge["evidence"]
    ]


def type_compatibility(
    old: Workspace, new: Workspace, delta: dict[str, Any], texts: dict[str, str]
) -> dict[str, Any]:
    """Every call site of a symbol whose parameters changed binds to the new signature (a change of
    annotations alone binds as before and is not checked), and none was left unfixed by the proposal.

    The sites are those of W~ and those of W carried to the projected text: the analysis links a call
    only when it binds, so a call the delta left unfit for the new signature has no edge in W~. The
    unresolved calls of the same name (the delta's possibly affected sites) are bound too: one that
    would not bind needs review, without failing the check (it may be a call of something else)."""
    renamed = {r["old"]: r["new"] for r in delta["expected"]["symbols_renamed"]}

    def text_of(artifact: str) -> str:
        if artifact in texts:
            return texts[artifact]
        return artifact_text(new.source_root, artifact) or ""

    line_maps = {a: _line_map(f["original"], f["projected"]) for a, f in delta["files"].items()}

    def projected(artifact: str, line: int, col: int) -> tuple[int, int] | None:
        """A position of W (a byte column) in the projected text, None if the edit removed its line."""
        if artifact not in delta["files"]:
            return line, char_column(text_of(artifact), line, col)
        if line not in line_maps[artifact]:
            return None
        return line_maps[artifact][line], char_column(delta["files"][artifact]["original"], line, col)

    sites: dict[str, dict[tuple[int, int], Site]] = {}
    review: list[dict[str, Any]] = []
    for item in delta["expected"]["symbols_changed"]:
        if "signature_changed" not in item["changes"]:
            continue
        target, was = item["id"], deltas.renamed_from(renamed, item["id"])
        if target not in new.graph or was not in old.graph:
            continue
        data = new.graph.nodes[target]
        params = _parameters(data)
        if params == _parameters(old.graph.nodes[was]):
            continue
        signature = f"{qname(target)}{data['signature']}"
        for side, node in ((old, was), (new, target)):
            for caller, ev in _calls_of(side, node):
                record = side.evidence[ev]
                artifact, line, col = record["artifact"], record["span"]["line"], record["span"]["col"]
                site = {"caller": deltas.renamed_to(renamed, caller), "callee": target, "file": artifact}
                where = (
                    projected(artifact, line, col)
                    if side is old
                    else (line, char_column(text_of(artifact), line, col))
                )
                if where is None:
                    review.append({**site, "line": line, "reason": "the edit removed the call's line"})
                    continue
                sites.setdefault(artifact, {})[where] = ({**site, "line": where[0]}, params, signature, True)
        name = qname(was).rsplit(".", 1)[-1]
        for unknown in delta["possibly_affected"]:
            if unknown["detail"].removesuffix("()").rsplit(".", 1)[-1] != name:
                continue
            artifact, span = unknown["artifact"], unknown["span"]
            where = projected(artifact, span["line"], span["col"])
            if where is not None:
                site = {"caller": deltas.renamed_to(renamed, unknown["scope"]), "callee": target,
                        "file": artifact, "line": where[0], "unresolved": unknown["detail"]}  # fmt: skip
                sites.setdefault(artifact, {}).setdefault(where, (site, params, signature, False))
    problems: list[dict[str, Any]] = []
    checked = unfit = 0
    for artifact, found in sorted(sites.items()):
        calls = calls_at(text_of(artifact), set(found))
        for position, (site, params, signature, resolved) in sorted(found.items()):
            call = calls.get(position)
            if call is None:
                if resolved:
                    review.append({**site, "reason": "no call at this position of the projected text"})
                continue
            checked += resolved
            try:
                bind(call, params)
            except Unbindable as exc:
                review.append({**site, "reason": str(exc)})
            except BindError as exc:
                if resolved:
                    problems.append({**site, "reason": f"{signature} {exc}"})
                else:
                    unfit += 1
                    review.append({**site, "reason": f"unresolved; if it calls {signature}, it {exc}"})
    # A call delta.propose left as written because an argument had no new parameter to go to may
    # still bind (a positional one lands on whatever parameter now stands there): it is unfixed.
    failed = {(p["file"], p["line"]) for p in problems}
    for edit in delta["needs_review"]:
        line = line_maps.get(edit["file"], {}).get(edit["line"], edit["line"])
        if edit.get("unmapped") and (edit["file"], line) not in failed:
            problems.append(
                {"caller": edit["caller"], "callee": edit["callee"], "file": edit["file"], "line": line,
                 "reason": f"left as written by delta.propose: {edit['reason']}"}
            )  # fmt: skip
    return _check(
        "type_compatibility",
        problems,
        call_sites_checked=checked,
        possibly_affected_unfit=unfit,
        needs_review=review[:SHOWN],
        needs_review_count=len(review),
    )


def _unknown_keys(
    ws: Workspace, artifacts: set[str], renamed: dict[str, str] | None = None
) -> Counter[tuple[str, str, str]]:
    # With `renamed`, an unknown inside a renamed function is keyed under the function's new name.
    return Counter(
        (deltas.renamed_to(renamed or {}, u["scope"]), u["reason"], u["detail"])
        for u in ws.unknowns.values()
        if u["artifact"] in artifacts
    )


def graph_invariants(old: Workspace, new: Workspace, delta: dict[str, Any]) -> dict[str, Any]:
    """No call names a removed symbol; every call site of a renamed or re-signed symbol still reaches
    it (a new name shadowed by a local would not); no new unresolved import in a touched file."""
    touched = set(delta["files"])
    renamed = {r["old"]: r["new"] for r in delta["expected"]["symbols_renamed"]}
    gone_names = {
        qname(n).rsplit(".", 1)[-1]
        for n, d in old.graph.nodes(data=True)
        if deltas.renamed_to(renamed, n) not in new.graph and d.get("kind") not in ("external", "builtin")
    }

    fresh = _unknown_keys(new, touched) - _unknown_keys(old, touched, renamed)
    problems = []
    moved_away = Counter(tuple(pair) for pair in delta["expected"]["call_sites_removed"])
    kept = set(renamed) | {
        deltas.renamed_from(renamed, i["id"])
        for i in delta["expected"]["symbols_changed"]
        if "signature_changed" in i["changes"]
    }
    for target in sorted(kept):
        now = deltas.renamed_to(renamed, target)
        for caller, _, key, edge in old.graph.in_edges(target, keys=True, data=True):
            if key != "calls":
                continue
            after = deltas.renamed_to(renamed, caller)
            reached = (
                len(new.graph.edges[after, now, "calls"]["evidence"])
                if new.graph.has_edge(after, now, "calls")
                else 0
            )
            expected = len(edge["evidence"]) - moved_away[(caller, target)]
            if reached < expected:
                problems.append(
                    {"scope": after, "callee": now, "count": expected - reached,
                     "problem": f"{expected - reached} call site(s) no longer reach {qname(now)} (shadowed "
                                "or unresolved)"}
                )  # fmt: skip
    for (scope, reason, detail), count in sorted(fresh.items()):
        last = detail.removesuffix("()").rsplit(".", 1)[-1]
        if last in gone_names:
            problem = f"a call still names {last}, which the delta removes or renames"
            problems.append(
                {"scope": scope, "reason": reason, "detail": detail, "count": count, "problem": problem}
            )
        elif reason in IMPORT_REASONS:
            problems.append({"scope": scope, "reason": reason, "detail": detail, "count": count,
                             "problem": "a new unresolved name or import"})  # fmt: skip
    return _check("graph_invariants", problems)


def contracts(old: Workspace, new: Workspace, delta: dict[str, Any]) -> dict[str, Any]:
    """Dropped parameters are not named by docstrings or asserts; suggested tests still exist."""
    renamed = {r["old"]: r["new"] for r in delta["expected"]["symbols_renamed"]}
    problems = []
    for item in delta["expected"]["symbols_changed"]:
        now, was = item["id"], deltas.renamed_from(renamed, item["id"])
        if "signature_changed" not in item["changes"] or now not in new.graph or was not in old.graph:
            continue
        before, after = old.graph.nodes[was], new.graph.nodes[now]
        dropped = set(before.get("params", [])) - set(after.get("params", []))
        for name in sorted(dropped):
            if name in (after.get("doc") or "").replace("-", " ").split() or any(
                name in a for a in after.get("asserts", [])
            ):
                problems.append(
                    {"symbol": now, "problem": f"the docstring or an assert still names {name!r}"}
                )
    for test in delta["suggested_validation"]["tests"]:
        if deltas.renamed_to(renamed, test) not in new.graph:
            problems.append({"symbol": test, "problem": "a test that reached the scope is gone"})
    return _check("contracts", problems)


def impact_boundary(
    old: Workspace, new: Workspace, delta: dict[str, Any], texts: dict[str, str]
) -> dict[str, Any]:
    """Symbols changed in W~ - W lie within scope + impact radius + what the delta intends."""
    allowed: set[str] = set()
    for node in delta["scope"]:
        if node in old.graph:
            allowed |= set(walk(old, node, ["called_by"], IMPACT_DEPTH))
    expected = delta["expected"]
    allowed |= {i["id"] for i in expected["symbols_changed"]} | set(expected["symbols_added"])
    allowed |= {r["new"] for r in expected["symbols_renamed"]} | {
        r["old"] for r in expected["symbols_renamed"]
    }

    def read(artifact: str) -> str | None:
        if artifact in texts:
            return texts[artifact]
        return artifact_text(new.source_root, artifact)

    renames = {r["old"]: r["new"] for r in expected["symbols_renamed"]}
    actual = compare(side_of(old), side_of(new, source=read), renames=renames)
    changed = [
        i["id"] for i in actual["symbols_changed"] + actual["symbols_added"] + actual["symbols_removed"]
    ]
    changed += [r["new"] for r in actual["symbols_renamed"]]
    outside = sorted(n for n in set(changed) if not within(n, allowed))
    problems = [
        {"symbol": n, "problem": "changed outside the scope, its impact radius and the intent"}
        for n in outside
    ]
    return _check("impact_boundary", problems, allowed=len(allowed), changed=len(set(changed)))


def confirmed_defects(
    text: str, artifact: str, messages: list[dict[str, Any]] | None = None
) -> Counter[tuple[str, str, str]]:
    """pyflakes' confirmed defects of a text (or of its messages, when known), as (file, rule,
    message) counts."""
    return Counter(
        (artifact, f"pyflakes:{m['rule']}", m["message"])
        for m in (_check_file(text, artifact) if messages is None else messages)
        if m["rule"] in DEFECTS or m["rule"] == "SyntaxError"
    )


def known_defects(ws: Workspace, store: Store, delta: dict[str, Any]) -> dict[str, Any]:
    """No new confirmed defect (pyflakes) in a touched file. The originals' messages are shared with
    analysis.findings through the store's pyflakes cache (keyed by the file's content key)."""
    problems = []
    for artifact, entry in sorted(delta["files"].items()):
        key = ws.files[artifact]["key"]
        messages = store.get_json("cache/pyflakes", key)
        if messages is None:
            messages = _check_file(entry["original"], artifact)
            store.put_json("cache/pyflakes", key, messages)
        before = confirmed_defects(entry["original"], artifact, messages)
        fresh = confirmed_defects(entry["projected"], artifact) - before
        for (file, rule, message), count in sorted(fresh.items()):
            problems.append({"file": file, "rule": rule, "message": message, "count": count})
    return _check("known_defects", problems)


def feasibility(ws: Workspace, delta: dict[str, Any], operation: str) -> dict[str, Any]:
    """Every file still has the hash the delta was proposed on.

    Raises:
        ConflictRequiresReview: a file changed or vanished since.
    """
    moved = deltas.changed_on_disk(
        Path(ws.source_root),
        ((artifact, entry["sha256"]) for artifact, entry in sorted(delta["files"].items())),
    )
    if moved:
        raise ConflictRequiresReview(
            f"{operation}: {', '.join(moved)} changed since delta {delta['delta_id']} was proposed, or "
            "cannot be read as a regular file inside the root; review the change, rebuild the workspace "
            "and propose again",
            details={"delta_id": delta["delta_id"], "changed_files": moved},
        )
    return _check("projection_feasibility", [], files=len(delta["files"]))


def run_checks(ws: Workspace, store: Store, delta: dict[str, Any], operation: str) -> dict[str, Any]:
    """The six checks of a delta on the files as they are now, as `validation` records them.

    Raises:
        ConflictRequiresReview: a file changed since the proposal (projection feasibility).
    """
    checks = [feasibility(ws, delta, operation)]
    texts = {a: f["projected"] for a, f in delta["files"].items()}
    new = project(ws, store, texts)
    checks += [
        type_compatibility(ws, new, delta, texts),
        graph_invariants(ws, new, delta),
        contracts(ws, new, delta),
        impact_boundary(ws, new, delta, texts),
        known_defects(ws, store, delta),
    ]
    failed = [c["check"] for c in checks if not c["ok"]]
    return {"at": deltas.now(), "ok": not failed, "failed": failed, "checks": checks}


def validate(ws: Workspace, request: dict[str, Any], store: Store) -> Answer:
    """delta.validate: run the six checks; VALIDATION_FAILED with all of them if any fails."""
    delta = deltas.load(store, ws, request["delta_id"])
    deltas.require_current(ws, delta, "delta.validate")
    delta["validation"] = run_checks(ws, store, delta, "delta.validate")
    checks, failed = delta["validation"]["checks"], delta["validation"]["failed"]
    delta["status"] = "validation_failed" if failed else "validated"
    deltas.save(store, ws, delta)
    if failed:
        raise ValidationFailed(
            f"delta {delta['delta_id']} fails {', '.join(failed)}; the problems are in data.checks: change "
            "the operations (e.g. a parameter_map value for every new required parameter) and propose again",
            details={
                "delta_id": delta["delta_id"],
                "status": delta["status"],
                "failed": failed,
                "checks": checks,
            },
        )
    return Answer(
        data={
            "delta_id": delta["delta_id"],
            "status": "validated",
            "failed": [],
            "next": "projection.preview to see the diff",
        },
        sections=[("checks", checks)],
    )
