"""delta.list and delta.describe: the deltas recorded for a workspace, read as they are stored.

Both read the sealed records `<store>/workspaces/<ws_id>/deltas/<delta_id>.json` (`slotrelay.psmr.delta`)
and write nothing: no record, no status, no source file. A record that is not a delta of the workspace
(its seal fails, its ids are not those of where it is stored, a field is missing) is left out of the
list with a warning naming it; it never hides the others. They are how a reader (the human view, an
agent resuming work) sees what was proposed and what the later steps recorded, without re-running them:

- `stale`: the delta was proposed on another version of the workspace than the current one (validate,
  preview and apply refuse it; propose again);
- `validation`: the result delta.validate recorded (each check with its problems, and the sites it left
  to review), or None;
- the preview diff: each changed file as the unified diff projection.preview renders, derived from the
  texts the delta holds (the same function, so the same lines), whether or not preview was called.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slotrelay.psmr import delta as deltas
from slotrelay.psmr.errors import ObjectNotFound
from slotrelay.psmr.projection import file_diff, is_test_module
from slotrelay.psmr.queries import Answer
from slotrelay.psmr.store import Store, Workspace

# What names the thing an operation works on, by operation kind (see operators.OPERATION_SCHEMA).
OPERATION_SUBJECT = {"add_symbol": "module", "move_call_site": "evidence_id"}


def _operation_summary(op: dict[str, Any]) -> dict[str, Any]:
    subject = op.get(OPERATION_SUBJECT.get(op["op"], "target"))
    return {"op": op["op"], "subject": subject}


def _recorded_at(record: dict[str, Any] | None) -> str | None:
    return record["at"] if record else None


def _validation_summary(delta: dict[str, Any]) -> dict[str, Any] | None:
    recorded = delta["validation"]
    if recorded is None:
        return None
    return {
        "at": recorded["at"],
        "ok": recorded["ok"],
        "failed": recorded["failed"],
        "needs_review": recorded.get("needs_review_count", 0),
    }


def _row(ws: Workspace, delta: dict[str, Any]) -> dict[str, Any]:
    return {
        "delta_id": delta["delta_id"],
        "intent": delta["intent"],
        "status": delta["status"],
        "authority": delta["authority"],
        "proposed_at": delta["proposed_at"],
        "workspace_version": delta["workspace_version"],
        "stale": delta["workspace_version"] != ws.version,
        "operations": [_operation_summary(op) for op in delta["operations"]],
        "files": deltas.changed_files(delta),
        "validation": _validation_summary(delta),
        "previewed_at": _recorded_at(delta["preview"]),
        "applied_at": _recorded_at(delta["apply"]),
    }


def list_deltas(ws: Workspace, request: dict[str, Any], store: Store) -> Answer:
    """delta.list: every delta recorded for the workspace, oldest first (by proposal time, which is to
    the second; ties by id), with its latest validation."""
    ids, warnings = deltas.recorded_ids(store, ws.workspace_id)
    rows = []
    for delta_id in ids:
        try:
            rows.append(_row(ws, deltas.load(store, ws, delta_id)))
        except ObjectNotFound as exc:
            warnings.append(f"{delta_id} is left out: {exc.message}")
    rows.sort(key=lambda r: (r["proposed_at"], r["delta_id"]))
    return Answer(
        data={
            "workspace_id": ws.workspace_id,
            "workspace_version": ws.version,
            "total": len(rows),
            "stale": sum(r["stale"] for r in rows),
        },
        sections=[("deltas", rows)],
        warnings=warnings,
    )


def _moved_files(ws: Workspace, delta: dict[str, Any]) -> list[str]:
    """The delta's files whose text on disk is no longer the one it was proposed on."""
    return deltas.changed_on_disk(
        Path(ws.source_root),
        ((artifact, entry["sha256"]) for artifact, entry in sorted(delta["files"].items())),
    )


def describe(ws: Workspace, request: dict[str, Any], store: Store) -> Answer:
    """delta.describe: one delta as recorded, its recorded validation and its diff per file.

    Raises:
        ObjectNotFound: no delta by that id in this workspace.
    """
    delta = deltas.load(store, ws, request["delta_id"])
    diffs = [
        {
            **file_diff(a, delta["files"][a]["original"], delta["files"][a]["projected"]),
            "test": is_test_module(delta["files"][a]["module"]),
        }
        for a in deltas.changed_files(delta)
    ]
    stale = delta["workspace_version"] != ws.version
    return Answer(
        data={
            **_row(ws, delta),
            "current_version": ws.version,
            "moved_files": [] if stale else _moved_files(ws, delta),
            "scope_refs": delta["scope_refs"],
            "scope": delta["scope"],
            "constraints": delta["constraints"],
            "operations": delta["operations"],
            "expected": delta["expected"],
            "suggested_validation": delta["suggested_validation"],
            "validation": delta["validation"],
            "apply": delta["apply"],
            "runs": delta["runs"],
            "roundtrip": delta.get("roundtrip"),
            "review": delta.get("review"),
        },
        sections=[
            ("edits", delta["edits"]),
            ("needs_review", delta["needs_review"]),
            ("possibly_affected", delta["possibly_affected"]),
            ("assumptions", delta["assumptions"]),
            ("affected_contracts", delta["affected_contracts"]),
            ("diffs", diffs),
        ],
    )
