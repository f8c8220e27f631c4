"""delta.validate: apply a delta in memory, re-extract the touched files, check the result.

The rule: CONTRACTS.md#changes-go-through-a-delta.

The projected workspace W~ is assembled like a build, from the stored facts of untouched files and
fresh facts of the projected ones, without writing anything. Seven checks, each with its own result:

- projection_feasibility: every file still has the hash the delta was proposed on (otherwise the
  answer is CONFLICT_REQUIRES_REVIEW, since nothing else can be judged on a moved base);
- type_compatibility: every call site of a changed signature binds to it in W~, and none was left as
  written because an argument had no new parameter to go to; the unresolved calls of the same name
  are listed for review;
- graph_invariants: every call site of a renamed or re-signed symbol still reaches it; nothing in the
  tree still names a removed or renamed symbol (`name_checks`: a bare name nothing binds or an import
  from the tree fails, an unresolved call or attribute of that name is listed for review, strings and
  docstrings only as warnings); a rename does not take a name its scope already binds (builtins
  included); no new unresolved import;
- contracts: no dropped parameter still named by a docstring or assert, no suggested test gone;
- impact_boundary: symbols changed in W~ - W lie within the scope, its impact radius or the intent;
- known_defects: no new confirmed finding (pyflakes) in a touched file;
- constraints: each of the delta's `constraints` holds in W~.

A delta failing any check answers VALIDATION_FAILED with every check in the envelope's `data`. A
delta passing them with sites to review (each listed with its file, line, column and text: every
site delta.propose flagged and did not edit, and every review item of a check) is `needs_review`,
not validated: projection.apply refuses it until each site is edited (`edit_reference`) or the
agent validates again with `accept_review: true`.
"""

from __future__ import annotations

import difflib
import hashlib
from collections import Counter
from pathlib import Path
from typing import Any

import libcst as cst
import orjson

from slotrelay.psmr.analysis.callbinding import BindError, Unbindable, bind, params_of, parse_parameters
from slotrelay.psmr.analysis.extract import extract
from slotrelay.psmr.analysis.link import Linker
from slotrelay.psmr.change import delta as deltas
from slotrelay.psmr.change.constraints import check as check_constraints
from slotrelay.psmr.change.name_checks import names_left, shadowed_names
from slotrelay.psmr.change.rewrite import calls_at, char_column
from slotrelay.psmr.errors import ConflictRequiresReview, ValidationFailed
from slotrelay.psmr.ops.diff import compare, side_of
from slotrelay.psmr.ops.externals import available_import
from slotrelay.psmr.ops.findings import DEFECTS, _check_file
from slotrelay.psmr.ops.queries import Answer
from slotrelay.psmr.ops.slicing import walk, within
from slotrelay.psmr.workspace.build import NotSource, Unanalysable, file_size_limit, read_source
from slotrelay.psmr.workspace.graph import GraphAssembler
from slotrelay.psmr.workspace.identity import qname
from slotrelay.psmr.workspace.importgraph import import_edges
from slotrelay.psmr.workspace.parts import Content
from slotrelay.psmr.workspace.store import Store, Workspace

IMPACT_DEPTH = 3
SHOWN = 25
IMPORT_REASONS = frozenset({"external_module", "unresolved_name", "dynamic_import"})
# Where a check's whole list of sites to review travels until validate pools them.
REVIEW = "_review"
# The sites to review a delta record keeps and delta.validate lists (`needs_review_count` counts all).
REVIEW_KEPT = 500


def project(ws: Workspace, store: Store, texts: dict[str, str]) -> tuple[Workspace, dict[str, str]]:
    """The workspace W~ the texts would give, assembled in memory (nothing is stored).

    Parameters:
        ws: the workspace W.
        store: its store (for the cached facts of the files left as they are).
        texts: artifact -> projected text.

    Returns:
        A workspace with version `projected`, and every file's text in it (the projected ones, the
        others as read from disk, empty where unreadable).
    """
    root = Path(ws.source_root).resolve()
    limit = file_size_limit(None)
    facts: dict[str, dict[str, Any]] = {}
    paths: dict[str, str] = {}
    sources: dict[str, str] = {}
    every: dict[str, str] = {}
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
        every[artifact] = text
        sources[artifact] = "" if cached.get("syntax_error") else text
    link = Linker(facts).run()
    edges, _ = import_edges(root, facts, sources, store=store)
    assembly = GraphAssembler(facts, paths, ws.commit).build(link, edges)
    files = {
        a: {**e, "sha256": hashlib.sha256(texts[a].encode()).hexdigest()} if a in texts else e
        for a, e in ws.files.items()
    }
    projected = Workspace(
        workspace_id=ws.workspace_id,
        root=ws.root,
        source_root=ws.source_root,
        rev=ws.rev,
        commit=ws.commit,
        version="projected",
        files=files,
        content=Content(assembly),
    )
    return projected, every


def _check(
    name: str, problems: list[dict[str, Any]], review: list[dict[str, Any]] | None = None, **extra: Any
) -> dict[str, Any]:
    """A check's result. Its sites to review travel whole under REVIEW (validate pools and removes
    them); the answer shows the first SHOWN of each list with the counts."""
    return {
        "check": name,
        "ok": not problems,
        "problems": problems[:SHOWN],
        "problem_count": len(problems),
        **({"needs_review": review[:SHOWN], "needs_review_count": len(review)} if review is not None else {}),
        **extra,
        REVIEW: review or [],
    }


def _line(text: str, line: int) -> str:
    lines = text.splitlines()
    return lines[line - 1].strip()[:200] if 1 <= line <= len(lines) else ""


def edited_sites(delta: dict[str, Any]) -> set[tuple[str, int, int]]:
    """(file, line, column) of every reference the delta edits by position (edit_reference, and the
    unresolved matches a rename_symbol with include_unresolved renames)."""
    return {(e["file"], e["line"], e["column"]) for e in delta["edits"] if e["kind"] == "reference"}


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
    old: Workspace, new: Workspace, delta: dict[str, Any], sources: dict[str, str]
) -> dict[str, Any]:
    """Every call site of a symbol whose parameters changed binds to the new signature (a change of
    annotations alone binds as before and is not checked), and none was left unfixed by the proposal.

    The sites are those of W~ and those of W carried to the projected text: the analysis links a call
    only when it binds, so a call the delta left unfit for the new signature has no edge in W~. The
    unresolved calls of the same name (the delta's possibly affected sites) are bound too: one that
    would not bind needs review, without failing the check (it may be a call of something else)."""
    renamed = {r["old"]: r["new"] for r in delta["expected"]["symbols_renamed"]}
    texts = _Texts(delta, sources)
    edited = edited_sites(delta)
    sites: dict[str, dict[tuple[int, int], Site]] = {}
    # The names a call of each changed symbol is written with, before and after the delta.
    names: dict[str, set[str]] = {}
    review: list[dict[str, Any]] = []
    for target, was in _parameters_changed(old, new, delta, renamed):
        params = _parameters(new.graph.nodes[target])
        signature = f"{qname(target)}{new.graph.nodes[target]['signature']}"
        names[target] = {qname(target).rsplit(".", 1)[-1], qname(was).rsplit(".", 1)[-1]}
        for side, node in ((old, was), (new, target)):
            for caller, ev in _calls_of(side, node):
                record = side.evidence[ev]
                artifact, line, col = record["artifact"], record["span"]["line"], record["span"]["col"]
                site = {"caller": deltas.renamed_to(renamed, caller), "callee": target, "file": artifact}
                where = (
                    texts.projected(artifact, line, col)
                    if side is old
                    else (line, char_column(texts.projected_text(artifact), line, col))
                )
                if where is None:
                    review.append({**site, "line": line, "reason": "the edit removed the call's line"})
                    continue
                sites.setdefault(artifact, {})[where] = ({**site, "line": where[0]}, params, signature, True)
        for where, site in _possibly_affected(delta, was, target, texts, renamed, edited):
            sites.setdefault(site["file"], {}).setdefault(where, (site, params, signature, False))
    problems, checked, unfit = _bind_sites(sites, names, texts, review)
    problems += _left_unfixed(delta, texts.line_maps, problems)
    return _check(
        "type_compatibility",
        problems,
        review,
        call_sites_checked=checked,
        possibly_affected_unfit=unfit,
    )


class _Texts:
    """The texts type_compatibility reads: the projected ones (W~) and the original ones (W), and where a
    position of W is in the projected text."""

    def __init__(self, delta: dict[str, Any], sources: dict[str, str]) -> None:
        self.delta_files: dict[str, dict[str, Any]] = delta["files"]
        self.sources = sources
        self.line_maps = {a: _line_map(f["original"], f["projected"]) for a, f in self.delta_files.items()}

    def projected_text(self, artifact: str) -> str:
        return self.sources.get(artifact, "")

    def original_text(self, artifact: str) -> str:
        if artifact in self.delta_files:
            original: str = self.delta_files[artifact]["original"]
            return original
        return self.projected_text(artifact)

    def projected(self, artifact: str, line: int, col: int) -> tuple[int, int] | None:
        """A position of W (a byte column) in the projected text, None if the edit removed its line."""
        if artifact not in self.delta_files:
            return line, char_column(self.projected_text(artifact), line, col)
        if line not in self.line_maps[artifact]:
            return None
        return self.line_maps[artifact][line], char_column(self.delta_files[artifact]["original"], line, col)


def _parameters_changed(
    old: Workspace, new: Workspace, delta: dict[str, Any], renamed: dict[str, str]
) -> list[tuple[str, str]]:
    """(identity in W~, identity in W) of each symbol the delta changes whose parameters changed."""
    out = []
    for item in delta["expected"]["symbols_changed"]:
        if "signature_changed" not in item["changes"]:
            continue
        target, was = item["id"], deltas.renamed_from(renamed, item["id"])
        if target not in new.graph or was not in old.graph:
            continue
        if _parameters(new.graph.nodes[target]) == _parameters(old.graph.nodes[was]):
            continue
        out.append((target, was))
    return out


def _possibly_affected(
    delta: dict[str, Any],
    was: str,
    target: str,
    texts: _Texts,
    renamed: dict[str, str],
    edited: set[tuple[str, int, int]],
) -> list[tuple[tuple[int, int], dict[str, Any]]]:
    """The delta's unresolved calls written with the changed symbol's old name that it did not edit,
    each with its position in the projected text (those whose line the edit removed are left out)."""
    name = qname(was).rsplit(".", 1)[-1]
    out = []
    for unknown in delta["possibly_affected"]:
        if unknown["detail"].removesuffix("()").rsplit(".", 1)[-1] != name:
            continue
        artifact, span = unknown["artifact"], unknown["span"]
        if (artifact, span["line"], span["col"]) in edited:
            continue
        where = texts.projected(artifact, span["line"], span["col"])
        if where is not None:
            # Where it is in the file as it stands, which is where edit_reference finds it.
            site = {"caller": deltas.renamed_to(renamed, unknown["scope"]), "callee": target,
                    "file": artifact, "line": span["line"], "column": span["col"],
                    "text": _line(texts.original_text(artifact), span["line"]),
                    "unresolved": unknown["detail"]}  # fmt: skip
            out.append((where, site))
    return out


def _bind_sites(
    sites: dict[str, dict[tuple[int, int], Site]],
    names: dict[str, set[str]],
    texts: _Texts,
    review: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], int, int]:
    """Bind the call at each site to its new signature; a resolved call that does not bind is a problem,
    an unresolved one (or one that cannot be judged) goes to `review`.

    Returns:
        The problems, the resolved sites checked, and the unresolved ones that would not bind.
    """
    problems: list[dict[str, Any]] = []
    checked = unfit = 0
    for artifact, found in sorted(sites.items()):
        calls = calls_at(texts.projected_text(artifact), set(found))
        for position, (site, params, signature, resolved) in sorted(found.items()):
            call = _call_of(calls.get(position, []), names[site["callee"]])
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
            else:
                if not resolved:
                    review.append({**site, "reason": f"unresolved; if it calls {signature}, it binds"})
    return problems, checked, unfit


def _left_unfixed(
    delta: dict[str, Any], line_maps: dict[str, dict[int, int]], problems: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The calls delta.propose left as written that no problem reports yet.

    A call left as written because an argument had no new parameter to go to may still bind (a
    positional one lands on whatever parameter now stands there): it is unfixed.
    """
    failed = {(p["file"], p["line"]) for p in problems}
    unfixed = []
    for edit in delta["needs_review"]:
        line = line_maps.get(edit["file"], {}).get(edit["line"], edit["line"])
        if edit.get("unmapped") and (edit["file"], line) not in failed:
            unfixed.append(
                {"caller": edit["caller"], "callee": edit["callee"], "file": edit["file"], "line": line,
                 "reason": f"left as written by delta.propose: {edit['reason']}"}
            )  # fmt: skip
    return unfixed


def _call_of(calls: list[Any], names: set[str]) -> Any:
    """Of the calls starting at one position (innermost first), the one whose callee is written with
    one of the names (`sqlparse.parse(s)[0].tokens[0].get_parameters()` starts where the call of
    `parse` does), else the innermost."""
    for call in calls:
        func = call.func
        last = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
        if last in names:
            return call
    return calls[0] if calls else None


def _unknown_keys(
    ws: Workspace, artifacts: set[str], renamed: dict[str, str] | None = None
) -> Counter[tuple[str, str, str]]:
    # With `renamed`, an unknown inside a renamed function is keyed under the function's new name.
    return Counter(
        (deltas.renamed_to(renamed or {}, u["scope"]), u["reason"], u["detail"])
        for u in ws.unknowns.values()
        if u["artifact"] in artifacts
    )


def graph_invariants(
    old: Workspace, new: Workspace, delta: dict[str, Any], sources: dict[str, str]
) -> dict[str, Any]:
    """Every call site of a renamed or re-signed symbol still reaches it (a new name shadowed by a
    local would not); nothing in the tree still names a removed or renamed symbol; a rename takes no
    name its scope binds; no new unresolved import in a touched file.

    Parameters:
        old: W.
        new: W~.
        delta: the delta.
        sources: every file's text in W~ (`project`).
    """
    touched = set(delta["files"])
    renamed = {r["old"]: r["new"] for r in delta["expected"]["symbols_renamed"]}
    fresh = _unknown_keys(new, touched) - _unknown_keys(old, touched, renamed)
    problems: list[dict[str, Any]] = []
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
        # An import of the standard library or an installed package is an unknown too (its code is
        # not analysed), but nothing the delta broke.
        if reason in IMPORT_REASONS and not available_import(reason, detail):
            problems.append({"scope": scope, "reason": reason, "detail": detail, "count": count,
                             "problem": "a new unresolved name or import"})  # fmt: skip
    problems += shadowed_names(old, delta)
    left, review, strings = names_left(old, new, delta, sources)
    problems += left
    check = _check("graph_invariants", problems, review)
    check["string_references"] = strings[:SHOWN]
    check["string_reference_count"] = len(strings)
    return check


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


def impact_boundary(old: Workspace, delta: dict[str, Any], actual: dict[str, list[Any]]) -> dict[str, Any]:
    """Symbols changed in W~ - W (`actual`) lie within scope + impact radius + what the delta intends."""
    allowed: set[str] = set()
    for node in delta["scope"]:
        if node in old.graph:
            allowed |= set(walk(old, node, ["called_by"], IMPACT_DEPTH))
    expected = delta["expected"]
    allowed |= {i["id"] for i in expected["symbols_changed"]} | set(expected["symbols_added"])
    allowed |= {r["new"] for r in expected["symbols_renamed"]} | {
        r["old"] for r in expected["symbols_renamed"]
    }
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


def fresh_unknowns(old: Workspace, new: Workspace, delta: dict[str, Any]) -> Counter[tuple[str, str, str]]:
    """The unknowns of the touched files W~ has and W had not (an unknown inside a renamed function
    counts under its new name), imports of the standard library or installed packages aside."""
    touched = set(delta["files"])
    renamed = {r["old"]: r["new"] for r in delta["expected"]["symbols_renamed"]}
    fresh = _unknown_keys(new, touched) - _unknown_keys(old, touched, renamed)
    return Counter({k: c for k, c in fresh.items() if not available_import(k[1], k[2])})


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


def flagged_by_propose(delta: dict[str, Any], listed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The sites delta.propose flagged (possibly affected, or needing review) that the delta did not
    edit and no check lists: each still needs review, so a flagged delta is never all-ok."""
    edited = edited_sites(delta)
    at = {(i.get("file"), i.get("line"), i.get("column")) for i in listed}
    callers = {(i.get("file"), i.get("caller")) for i in listed}
    out = []
    for unknown in delta["possibly_affected"]:
        site = (unknown["artifact"], unknown["span"]["line"], unknown["span"]["col"])
        if site in edited or site in at:
            continue
        text = delta["files"][site[0]]["original"] if site[0] in delta["files"] else ""
        out.append(
            {"file": site[0], "line": site[1], "column": site[2],
             "text": _line(text, site[1]) or unknown["detail"], "scope": unknown["scope"],
             "reason": f"flagged by delta.propose: {unknown['why']}"}
        )  # fmt: skip
    for edit in delta["needs_review"]:
        if (edit["file"], edit.get("caller")) not in callers:
            out.append(
                {"file": edit["file"], "line": edit["line"], "caller": edit.get("caller"),
                 "reason": f"flagged by delta.propose: {edit.get('reason', 'needs review')}"}
            )  # fmt: skip
    return out


def run_checks(ws: Workspace, store: Store, delta: dict[str, Any], operation: str) -> dict[str, Any]:
    """The seven checks of a delta on the files as they are now, and the sites they leave to review.

    Returns:
        `{"at", "ok", "failed", "checks", "needs_review", "needs_review_count", "strings"}`: `ok` when
        no check fails; the sites to review (every one, `needs_review_count` of them, the first
        REVIEW_KEPT kept); how many strings name what the delta takes away.

    Raises:
        ConflictRequiresReview: a file changed since the proposal (projection feasibility).
    """
    checks = [feasibility(ws, delta, operation)]
    texts = {a: f["projected"] for a, f in delta["files"].items()}
    new, sources = project(ws, store, texts)
    renames = {r["old"]: r["new"] for r in delta["expected"]["symbols_renamed"]}
    actual = compare(side_of(ws), side_of(new, source=sources.get), renames=renames)
    checks += [
        type_compatibility(ws, new, delta, sources),
        graph_invariants(ws, new, delta, sources),
        contracts(ws, new, delta),
        impact_boundary(ws, delta, actual),
        known_defects(ws, store, delta),
        _check(
            "constraints",
            check_constraints(ws, delta, actual, fresh_unknowns(ws, new, delta)),
            constraints=len(delta["constraints"]),
        ),
    ]
    review = [item for c in checks for item in c.pop(REVIEW)]
    review += flagged_by_propose(delta, review + [p for c in checks for p in c["problems"]])
    failed = [c["check"] for c in checks if not c["ok"]]
    return {
        "at": deltas.now(),
        "ok": not failed,
        "failed": failed,
        "checks": checks,
        "needs_review": review[:REVIEW_KEPT],
        "needs_review_count": len(review),
        "strings": sum(c.get("string_reference_count", 0) for c in checks),
    }


def unaccepted(recorded: dict[str, Any] | None, result: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """The sites to review that checks run again (`result`, from `run_checks`) list and the recorded
    validation did not accept: every one, unless it accepted its sites; else those it did not list.

    Returns:
        The sites not accepted (those among the kept ones) and how many there are at least (more than
        were accepted means new ones, listed or not).
    """
    if not result["needs_review_count"]:
        return [], 0
    if not recorded or not recorded.get("accepted_review"):
        return list(result["needs_review"]), result["needs_review_count"]
    accepted = {orjson.dumps(site, option=orjson.OPT_SORT_KEYS) for site in recorded["needs_review"]}
    new = [s for s in result["needs_review"] if orjson.dumps(s, option=orjson.OPT_SORT_KEYS) not in accepted]
    return new, max(len(new), result["needs_review_count"] - recorded["needs_review_count"])


def validate(ws: Workspace, request: dict[str, Any], store: Store) -> Answer:
    """delta.validate: run the seven checks; VALIDATION_FAILED with all of them if any fails, else
    `needs_review` while sites are left to review (unless the request accepts them), else validated."""
    delta = deltas.load(store, ws, request["delta_id"])
    deltas.require_current(ws, delta, "delta.validate")
    result = run_checks(ws, store, delta, "delta.validate")
    checks, failed, review = result["checks"], result["failed"], result["needs_review"]
    strings = result.pop("strings")
    accepted = bool(review) and bool(request.get("accept_review")) and not failed
    if failed:
        status = "validation_failed"
    elif review and not accepted:
        status = "needs_review"
    else:
        status = "validated"
    delta["status"] = status
    # The recorded `ok` is what projection.apply requires: validated, or its sites accepted.
    delta["validation"] = {**result, "ok": status == "validated", "accepted_review": accepted}
    deltas.save(store, ws, delta)
    warnings = []
    if strings:
        warnings.append(
            f"{strings} string(s) or docstring(s) still name a symbol the delta removes or renames "
            "(graph_invariants.string_references): check whether they should change too"
        )
    if failed:
        raise ValidationFailed(
            f"delta {delta['delta_id']} fails {', '.join(failed)}; the problems are in data.checks: change "
            "the operations (e.g. a parameter_map value for every new required parameter, an "
            "edit_reference for a site still naming a renamed symbol) and propose again",
            details={
                "delta_id": delta["delta_id"],
                "status": status,
                "failed": failed,
                "checks": checks,
                "needs_review": review[:SHOWN],
                "needs_review_count": result["needs_review_count"],
            },
        )
    if status == "needs_review":
        after = (
            "edit each site in needs_review (edit_reference, or rename_symbol with include_unresolved) and "
            "propose again, or, once each is checked, delta.validate again with accept_review: true"
        )
    else:
        after = "projection.preview to see the diff"
    return Answer(
        data={
            "delta_id": delta["delta_id"],
            "status": status,
            "failed": [],
            "needs_review_count": result["needs_review_count"],
            "accepted_review": accepted,
            "next": after,
        },
        sections=[("checks", checks), ("needs_review", review)],
        warnings=warnings,
    )
