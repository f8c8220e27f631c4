"""The slow pass: jedi inference for the call sites the fast pass left unknown, on demand.

Only the unknowns inside a queried slice are asked about, and jedi's answers are cached in the store
per file content key, so a second query (or another session) over the same file costs nothing. An
inferred edge carries resolution `inference`, authority `static:jedi` and status `inferred`; it is
shown beside the stored graph, never written into it, so the fast pass's edges stay what they were.
Where jedi contradicts a heuristic edge, the disagreement is a conflict, recorded in the store under
the caller's file content key so that query.conflicts lists it afterwards (a changed file, or an edge
the fast pass no longer draws, retires it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slotrelay.psmr.ops.slicing import unknowns_in
from slotrelay.psmr.workspace.build import artifact_text
from slotrelay.psmr.workspace.identity import qname, sid, stable_id
from slotrelay.psmr.workspace.importgraph import import_base
from slotrelay.psmr.workspace.store import Store, Workspace

INFERABLE = frozenset(
    {
        "untyped_receiver",
        "attribute_not_found",
        "call_result",
        "untyped_value",
        "container_element",
        "external_base_class",
        "ambiguous_target",
        "parameter_call",
    }
)
DISAGREEMENTS = "cache/disagreements"


@dataclass
class Inference:
    """What the slow pass adds to a slice: edges, their evidence, conflicts with the fast pass, warnings."""

    edges: list[dict[str, Any]] = field(default_factory=list)
    evidence: dict[str, dict[str, Any]] = field(default_factory=dict)
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _ask_jedi(ws: Workspace, artifact: str, sites: list[dict[str, Any]]) -> dict[str, list[str]]:
    import jedi

    path = Path(ws.source_root) / artifact
    # The text comes from the build's reader: jedi given only a path would open it itself, and wait
    # forever on a FIFO swapped in for the file.
    code = artifact_text(ws.source_root, artifact)
    if code is None:
        raise ValueError("it cannot be read now (not a regular file inside the root, or gone)")
    script = jedi.Script(
        code, path=str(path), project=jedi.Project(str(import_base(Path(ws.source_root))))
    )
    answers: dict[str, list[str]] = {}
    for unknown in sites:
        span = unknown["span"]
        line, column = span["end_line"], max(span["end_col"] - 1, 0)
        try:
            # goto names the definition an attribute or name refers to; for a parameter or a
            # variable that is the binding itself, so fall back to inferring its value.
            names = [
                n
                for n in script.goto(line, column, follow_imports=True)
                if n.type in ("function", "class") and n.full_name
            ]
            if not names:
                names = [
                    n for n in script.infer(line, column) if n.type in ("function", "class") and n.full_name
                ]
        except Exception:  # noqa: BLE001 - jedi fails on some constructs; the site stays unknown
            names = []
        answers[_site_key(span)] = sorted({n.full_name for n in names})
    return answers


def _agrees(static: str, inferred: list[str]) -> bool:
    # jedi names a constructor call by its class, the fast pass by the class's __init__; and jedi names
    # an external definition where it is defined (json.decoder.JSONDecoder.decode), the fast pass by the
    # import path it was reached through (json.JSONDecoder.decode): same package, same Class.method.
    return any(
        static == name
        or static.startswith(name + ".")
        or name.startswith(static + ".")
        or (static.split(".")[0] == name.split(".")[0] and static.split(".")[-2:] == name.split(".")[-2:])
        for name in inferred
    )


def infer_slice(ws: Workspace, distance: dict[str, int], store: Store) -> Inference:
    """Inferred call edges for the inferable unknowns of a slice, and where jedi contradicts a heuristic edge.

    Parameters:
        ws: the workspace.
        distance: the slice's nodes (to their distance from the anchor).
        store: the store holding the jedi cache.

    Returns:
        The overlay edges, their evidence records, the passes' disagreements and warnings.
    """
    by_file, checked = _sites_to_ask(ws, set(distance))
    out = Inference()
    answers: dict[str, dict[str, list[str]]] = {}
    for artifact, sites in sorted(by_file.items()):
        entry = ws.files.get(artifact)
        if entry is None:
            continue
        cache = store.get_json("cache/jedi", entry["key"]) or {}
        missing = [u for u in sites if _site_key(u["span"]) not in cache]
        if missing:
            try:
                cache.update(_ask_jedi(ws, artifact, missing))
            except Exception as exc:  # noqa: BLE001 - a jedi failure leaves the unknowns as they are
                out.warnings.append(f"jedi could not analyse {artifact} ({type(exc).__name__}: {exc})")
                continue
            store.put_json("cache/jedi", entry["key"], cache)
        answers[artifact] = cache
        _add_inferred_edges(out, ws, artifact, [u for u in sites if "id" in u], cache)
    contradicted = _add_disagreements(out, checked, answers)
    _record(ws, store, out.conflicts, contradicted)
    return out


def _sites_to_ask(
    ws: Workspace, members: set[str]
) -> tuple[dict[str, list[dict[str, Any]]], list[tuple[str, str, dict[str, Any]]]]:
    """The call sites to ask jedi about, by file: the slice's inferable unknowns and the sites of its
    heuristic call edges; and those edges, as (caller, callee, evidence record)."""
    by_file: dict[str, list[dict[str, Any]]] = {}
    for unknown in unknowns_in(ws, members):
        if unknown["reason"] in INFERABLE:
            by_file.setdefault(unknown["artifact"], []).append(unknown)
    # Heuristic edges (argument flow) are the fast pass's weakest: jedi checks them too.
    checked: list[tuple[str, str, dict[str, Any]]] = []
    for source, target, key, data in ws.graph.out_edges(members, keys=True, data=True):
        for ev in data["evidence"] if key == "calls" else []:
            record = ws.evidence[ev]
            if record["resolution"] == "heuristic":
                checked.append((source, target, record))
                by_file.setdefault(record["artifact"], []).append({"span": record["span"]})
    return by_file, checked


def _add_inferred_edges(
    out: Inference, ws: Workspace, artifact: str, unknowns: list[dict[str, Any]], cache: dict[str, list[str]]
) -> None:
    """An inferred call edge, with its evidence, for each definition jedi names at an unknown's site."""
    for unknown in unknowns:
        for full_name in cache.get(_site_key(unknown["span"]), []):
            ev = stable_id("ev", "jedi", unknown["id"], full_name)
            out.evidence[ev] = {
                "id": ev,
                "about": f"{unknown['scope']} calls {full_name}",
                "artifact": artifact,
                "revision": ws.commit,
                "span": unknown["span"],
                "resolution": "inference",
                "authority": "static:jedi",
                "status": "inferred",
            }
            out.edges.append(
                {
                    "source": unknown["scope"],
                    "target": sid(full_name),
                    "relation": "calls",
                    "evidence_refs": [ev],
                    "resolution": "inference",
                    "status": "inferred",
                    "resolves": [{"id": unknown["id"]}],
                }
            )


def _add_disagreements(
    out: Inference, checked: list[tuple[str, str, dict[str, Any]]], answers: dict[str, dict[str, list[str]]]
) -> dict[str, str]:
    """A conflict for each heuristic edge jedi infers otherwise; returns each conflict's id to the
    callee the fast pass drew."""
    contradicted: dict[str, str] = {}
    for source, target, record in sorted(checked, key=lambda c: (c[0], c[1], c[2]["id"])):
        inferred = answers.get(record["artifact"], {}).get(_site_key(record["span"]), [])
        if inferred and not _agrees(qname(target), inferred):
            cid = stable_id("cf", "passes_disagree", source, target, record["id"])
            contradicted[cid] = target
            out.conflicts.append(
                {
                    "id": cid,
                    "kind": "passes_disagree",
                    "subject": source,
                    "detail": f"the fast pass resolves the call at line {record['span']['line']} to "
                    f"{qname(target)} (argument flow); jedi infers {', '.join(inferred)}",
                    "evidence_refs": [record["id"]],
                    "status": "open",
                }
            )
    return contradicted


def _record(
    ws: Workspace, store: Store, conflicts: list[dict[str, Any]], contradicted: dict[str, str]
) -> None:
    # Each record keeps the target of the edge it contradicts, to check later that the edge still stands.
    by_key: dict[str, dict[str, dict[str, Any]]] = {}
    for conflict in conflicts:
        record = ws.evidence[conflict["evidence_refs"][0]]
        key = ws.files[record["artifact"]]["key"]
        by_key.setdefault(key, {})[conflict["id"]] = {
            "target": contradicted[conflict["id"]],
            "conflict": conflict,
        }
    for key, found in by_key.items():
        known = store.get_json(DISAGREEMENTS, key) or {}
        if not found.keys() <= known.keys():
            store.put_json(DISAGREEMENTS, key, {**known, **found})


def recorded_disagreements(ws: Workspace, store: Store) -> list[dict[str, Any]]:
    """The passes' disagreements recorded by earlier inference queries that still hold in this workspace.

    A record holds while its file's content key is the workspace's and the heuristic edge it
    contradicts is still in the graph with the same evidence.

    Parameters:
        ws: the workspace.
        store: the store holding the records.

    Returns:
        The conflict records, by id.
    """
    recorded = store.json_keys(DISAGREEMENTS)
    out = []
    for entry in ws.files.values():
        if entry["key"] not in recorded:
            continue
        for item in (store.get_json(DISAGREEMENTS, entry["key"]) or {}).values():
            conflict, target = item["conflict"], item["target"]
            source, ev = conflict["subject"], conflict["evidence_refs"][0]
            edge = (source, target, "calls")
            if edge in ws.edges and ev in ws.edges[edge]["evidence"]:
                out.append(conflict)
    return sorted(out, key=lambda c: c["id"])


def _site_key(span: dict[str, int]) -> str:
    return f"{span['end_line']}:{span['end_col']}"
