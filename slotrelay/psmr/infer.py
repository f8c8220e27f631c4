"""The slow pass: jedi inference for the call sites the fast pass left unknown, on demand.

Only the unknowns inside a queried slice are asked about, and jedi's answers are cached in the store
per file content key, so a second query (or another session) over the same file costs nothing. An
inferred edge carries resolution `inference`, authority `static:jedi` and status `inferred`; it is
shown beside the stored graph, never written into it, so the fast pass's edges stay what they were.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slotrelay.psmr.graph import sid, stable_id
from slotrelay.psmr.slicing import unknowns_in
from slotrelay.psmr.store import Store, Workspace

INFERABLE = frozenset({"untyped_receiver", "attribute_not_found", "call_result", "untyped_value",
                       "container_element", "external_base_class", "ambiguous_target", "parameter_call"})


def _project_base(ws: Workspace) -> Path:
    source = Path(ws.source_root)
    return source.parent if (source / "__init__.py").exists() else source


def _ask_jedi(ws: Workspace, artifact: str, sites: list[dict[str, Any]]) -> dict[str, list[str]]:
    import jedi

    path = Path(ws.source_root) / artifact
    script = jedi.Script(path=str(path), project=jedi.Project(str(_project_base(ws))))
    answers: dict[str, list[str]] = {}
    for unknown in sites:
        span = unknown["span"]
        try:
            names = script.goto(span["end_line"], max(span["end_col"] - 1, 0), follow_imports=True)
        except Exception:  # noqa: BLE001 - jedi fails on some constructs; the site stays unknown
            names = []
        answers[f"{span['end_line']}:{span['end_col']}"] = sorted(
            {n.full_name for n in names if n.type in ("function", "class") and n.full_name})
    return answers


def infer_slice(ws: Workspace, distance: dict[str, int], store: Store) -> tuple[list[dict[str, Any]], dict[str, Any], list[str]]:
    """Inferred call edges for the inferable unknowns of a slice.

    Parameters:
        ws: the workspace.
        distance: the slice's nodes (to their distance from the anchor).
        store: the store holding the jedi cache.

    Returns:
        (overlay edges, their evidence records by id, warnings).
    """
    by_file: dict[str, list[dict[str, Any]]] = {}
    for unknown in unknowns_in(ws, set(distance)):
        if unknown["reason"] in INFERABLE:
            by_file.setdefault(unknown["artifact"], []).append(unknown)
    edges: list[dict[str, Any]] = []
    evidence: dict[str, Any] = {}
    warnings: list[str] = []
    for artifact, sites in sorted(by_file.items()):
        entry = ws.files.get(artifact)
        if entry is None:
            continue
        cache = store.get_json("cache/jedi", entry["key"]) or {}
        missing = [u for u in sites if f"{u['span']['end_line']}:{u['span']['end_col']}" not in cache]
        if missing:
            try:
                cache.update(_ask_jedi(ws, artifact, missing))
            except Exception as exc:  # noqa: BLE001 - a jedi failure leaves the unknowns as they are
                warnings.append(f"jedi could not analyse {artifact} ({type(exc).__name__}: {exc})")
                continue
            store.put_json("cache/jedi", entry["key"], cache)
        for unknown in sites:
            for full_name in cache.get(f"{unknown['span']['end_line']}:{unknown['span']['end_col']}", []):
                target = sid(full_name)
                ev = stable_id("ev", "jedi", unknown["id"], full_name)
                evidence[ev] = {"id": ev, "about": f"{unknown['scope']} calls {full_name}", "artifact": artifact,
                                "revision": ws.commit, "span": unknown["span"], "resolution": "inference",
                                "authority": "static:jedi", "status": "inferred"}
                edges.append({"source": unknown["scope"], "target": target, "relation": "calls",
                              "evidence_refs": [ev], "resolution": "inference", "status": "inferred",
                              "resolves": [{"id": unknown["id"]}]})
    return edges, evidence, warnings
