"""analysis.semantic_diff: ΔG between two workspaces, or between two git revisions of one root.

Symbols are compared by semantic identity: added, removed, signature changed, body changed (the
AST digest of the definition). Edges and state accesses are compared as (source, relation, target)
triples, each side's evidence from its own workspace. Public-API breakages come from griffe, which
loads both trees' packages and reports removed objects, changed parameters, return types and bases.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slotrelay.psmr.build import build
from slotrelay.psmr.errors import ExecutionFailed, InvalidQuery
from slotrelay.psmr.importgraph import import_base
from slotrelay.psmr.queries import Answer
from slotrelay.psmr.slicing import CODE_KINDS, edge_item
from slotrelay.psmr.store import Store, Workspace

STRUCTURE = frozenset({"calls", "imports", "inherits", "decorates", "defines", "tests"})
STATE = frozenset({"reads_state", "writes_state"})


def _pair(request: dict[str, Any], store: Store) -> tuple[Workspace, Workspace]:
    if request.get("workspace_a") and request.get("workspace_b"):
        return store.load(request["workspace_a"]), store.load(request["workspace_b"])
    if request.get("workspace_id") and request.get("rev_a") and request.get("rev_b"):
        base = store.load(request["workspace_id"])
        sides = [
            build(base.root, rev=request[r], store=store.path)["workspace_id"] for r in ("rev_a", "rev_b")
        ]
        return store.load(sides[0]), store.load(sides[1])
    raise InvalidQuery(
        "analysis.semantic_diff needs workspace_a and workspace_b, or workspace_id with rev_a "
        "and rev_b (git revisions of that workspace's root)"
    )


def _edges(ws: Workspace, relations: frozenset[str]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(u, k, v): edge_item(ws, u, v, k) for u, v, k in ws.graph.edges(keys=True) if k in relations}


def _symbols(ws: Workspace) -> dict[str, dict[str, Any]]:
    return {n: d for n, d in ws.graph.nodes(data=True) if d["kind"] in CODE_KINDS | {"state"}}


def api_breakages(old: Workspace, new: Workspace) -> tuple[list[dict[str, Any]], list[str]]:
    """griffe's breaking changes between the top-level packages both trees hold."""
    import griffe

    warnings: list[str] = []
    out: list[dict[str, Any]] = []
    tops = sorted(
        {e["module"].split(".")[0] for e in old.files.values()}
        & {e["module"].split(".")[0] for e in new.files.values()}
    )
    for top in tops:
        try:
            before, after = (
                griffe.load(
                    top,
                    search_paths=[str(import_base(Path(ws.source_root)))],
                    try_relative_path=False,
                    allow_inspection=False,
                    resolve_aliases=False,
                )
                for ws in (old, new)
            )
            for breakage in griffe.find_breaking_changes(before, after):
                out.append(
                    {
                        "kind": breakage.kind.name.lower(),
                        "title": breakage.kind.value,
                        "object": breakage.obj.path,
                        "old": str(breakage.old_value),
                        "new": str(breakage.new_value),
                        "explanation": breakage.explain().strip(),
                    }
                )
        except Exception as exc:  # noqa: BLE001 - griffe's own failure is reported, the rest of ΔG stands
            warnings.append(f"griffe could not compare {top} ({type(exc).__name__}: {exc})")
    return sorted(out, key=lambda b: (b["object"], b["kind"])), warnings


def semantic_diff(request: dict[str, Any], *, store: Store) -> Answer:
    """analysis.semantic_diff: the delta between two workspaces with evidence."""
    old, new = _pair(request, store)
    a, b = _symbols(old), _symbols(new)
    added = [
        {
            "id": n,
            "kind": b[n]["kind"],
            "artifact": b[n].get("artifact"),
            "evidence_refs": b[n].get("evidence", []),
        }
        for n in sorted(set(b) - set(a))
    ]
    removed = [
        {
            "id": n,
            "kind": a[n]["kind"],
            "artifact": a[n].get("artifact"),
            "evidence_refs": a[n].get("evidence", []),
        }
        for n in sorted(set(a) - set(b))
    ]
    changed = []
    for n in sorted(set(a) & set(b)):
        what = [k for k in ("signature", "body_hash") if a[n].get(k) != b[n].get(k)]
        if what:
            changed.append(
                {
                    "id": n,
                    "changes": ["signature_changed" if k == "signature" else "body_changed" for k in what],
                    "old_signature": a[n].get("signature"),
                    "new_signature": b[n].get("signature"),
                    "evidence_refs": b[n].get("evidence", []),
                }
            )
    sections: list[tuple[str, list[Any]]] = [
        ("symbols_added", added),
        ("symbols_removed", removed),
        ("symbols_changed", changed),
    ]
    for name, relations in (("edges", STRUCTURE), ("state_accesses", STATE)):
        ea, eb = _edges(old, relations), _edges(new, relations)
        sections.append((f"{name}_added", [eb[k] for k in sorted(set(eb) - set(ea))]))
        sections.append((f"{name}_removed", [ea[k] for k in sorted(set(ea) - set(eb))]))
    try:
        breakages, warnings = api_breakages(old, new)
    except ImportError as exc:
        raise ExecutionFailed(f"griffe is not importable ({exc}); pip install griffe") from exc
    sections.append(("api_breakages", breakages))
    answer = Answer(
        version=f"{old.version}:{new.version}",
        sections=sections,
        warnings=warnings,
        data={
            "workspace_a": old.workspace_id,
            "workspace_b": new.workspace_id,
            "revision_a": old.commit,
            "revision_b": new.commit,
            "evidence_from": {"added": new.workspace_id, "removed": old.workspace_id},
            "counts": {name: len(items) for name, items in sections},
        },
    )
    return answer
