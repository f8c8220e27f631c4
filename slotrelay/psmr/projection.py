"""projection.preview and projection.apply: a delta's files as a diff, then on disk.

The rule: CONTRACTS.md#changes-go-through-a-delta.

Preview renders each changed file as a unified diff (`patch` for source files, `test` for test
modules, or `source`, the whole projected text), paged to the budget like every answer, and writes
no source file; it records the hashes it saw. Apply needs the `source-write` capability for every
file, and writes only while each file still has the hash the preview saw:

1. every projected text goes to a temporary file beside its target, flushed and fsynced;
2. the temporaries are renamed over their targets; if any step fails, every file already replaced
   gets its original text back (atomically too) and the apply answers EXECUTION_FAILED;
3. each apply is one record of a hash-chained audit log of its own
   (`<root>/.slotrelay/psmr-apply.jsonl`, the pen's chain: `slotrelay.pen.audit.AuditLog`).

Before writing, the workspace as it stands (W) is kept beside the delta as plain data
(`<delta_id>.before.json`), so verification.roundtrip can compare W' - W after the rebuild.
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import Any

from slotrelay.pen.audit import AuditLog
from slotrelay.psmr import delta as deltas
from slotrelay.psmr.diff import side_of
from slotrelay.psmr.errors import (
    ConflictRequiresReview,
    ExecutionFailed,
    InvalidQuery,
    UnsupportedProjection,
    ValidationFailed,
)
from slotrelay.psmr.grants import Grants
from slotrelay.psmr.queries import Answer
from slotrelay.psmr.store import Store, Workspace
from slotrelay.psmr.validation import feasibility

PROJECTIONS = ("patch", "test", "source")
AUDIT_NAME = "psmr-apply"


def is_test_module(module: str) -> bool:
    """True for a test module, by the names pytest collects (`test_*`, `*_test`, a `tests` package)."""
    last = module.rsplit(".", 1)[-1]
    return last.startswith("test_") or last.endswith("_test") or ".tests." in f".{module}."


def file_diff(artifact: str, before: str, after: str) -> dict[str, Any]:
    """One file's change as a unified diff (`a/` and `b/` paths) with its added and removed line counts."""
    lines = list(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            f"a/{artifact}",
            f"b/{artifact}",
        )
    )
    return {
        "file": artifact,
        "diff": "".join(
            line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
        ),
        "added": sum(1 for line in lines if line.startswith("+") and not line.startswith("+++")),
        "removed": sum(1 for line in lines if line.startswith("-") and not line.startswith("---")),
    }


def preview(ws: Workspace, request: dict[str, Any], store: Store) -> Answer:
    """projection.preview: the delta as unified diffs (or projected sources); nothing is written."""
    delta = deltas.load(store, ws, request["delta_id"])
    deltas.require_current(ws, delta, "projection.preview")
    wanted = request.get("projections", ["patch", "test"])
    for name in wanted:
        if name not in PROJECTIONS:
            raise UnsupportedProjection(
                f"projections: {name!r} is not produced by projection.preview; it renders "
                f"{', '.join(PROJECTIONS)} "
                "(schema and documentation changes are not derived from a delta)"
            )
    feasibility(ws, delta, "projection.preview")
    files = deltas.changed_files(delta)
    sections: list[tuple[str, list[Any]]] = []
    for name in wanted:
        if name == "source":
            items = [{"file": a, "source": delta["files"][a]["projected"]} for a in files]
        else:
            test = name == "test"
            items = [
                file_diff(a, delta["files"][a]["original"], delta["files"][a]["projected"])
                for a in files
                if is_test_module(delta["files"][a]["module"]) == test
            ]
        sections.append((name, items))
    delta["preview"] = {"at": deltas.now(), "hashes": {a: delta["files"][a]["sha256"] for a in files}}
    if delta["status"] == "validated":
        delta["status"] = "previewed"
    deltas.save(store, delta)
    return Answer(
        data={
            "delta_id": delta["delta_id"],
            "status": delta["status"],
            "validated": bool((delta["validation"] or {}).get("ok")),
            "files": files,
            "next": "projection.apply (needs the source-write capability) once delta.validate passed",
        },
        sections=sections,
    )


def _write_temp(path: Path, text: str) -> Path:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.psmr-tmp")
    with tmp.open("w", encoding="utf-8", newline="") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(tmp, path.stat().st_mode & 0o7777)
    return tmp


def _fsync_folder(folder: Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_all(paths: dict[Path, tuple[str, str]]) -> None:
    """Replace each file's text atomically; on any failure put back every file already replaced.

    Parameters:
        paths: file -> (original text, new text).

    Raises:
        OSError: the write failed (after the originals were restored).
    """
    temps: dict[Path, Path] = {}
    replaced: list[Path] = []
    try:
        for path, (_, new) in paths.items():
            temps[path] = _write_temp(path, new)
        for path, tmp in temps.items():
            tmp.replace(path)
            replaced.append(path)
        for folder in {p.parent for p in paths}:
            _fsync_folder(folder)
    except OSError:
        for path in replaced:
            _write_temp(path, paths[path][0]).replace(path)
        raise
    finally:
        for tmp in temps.values():
            tmp.unlink(missing_ok=True)


def apply(ws: Workspace, request: dict[str, Any], store: Store, grants: Grants) -> Answer:
    """projection.apply: write a validated, previewed delta while every file has the previewed hash."""
    grants.require_write("projection.apply", [])
    delta = deltas.load(store, ws, request["delta_id"])
    deltas.require_current(ws, delta, "projection.apply")
    if delta["apply"] is not None:
        raise InvalidQuery(
            f"delta {delta['delta_id']} was applied at {delta['apply']['at']}; propose a new one"
        )
    if not (delta["validation"] or {}).get("ok"):
        raise ValidationFailed(
            f"delta {delta['delta_id']} has not passed delta.validate (status {delta['status']}); validate "
            "it first",
            details={"delta_id": delta["delta_id"], "status": delta["status"]},
        )
    if delta["preview"] is None:
        raise InvalidQuery(f"delta {delta['delta_id']} was not previewed; call projection.preview first")
    files = deltas.changed_files(delta)
    root = Path(ws.source_root)
    grants.require_write("projection.apply", [root / a for a in files])
    moved = deltas.changed_on_disk(
        root, ((artifact, delta["preview"]["hashes"].get(artifact)) for artifact in files)
    )
    if moved:
        raise ConflictRequiresReview(
            f"projection.apply: {', '.join(moved)} changed since projection.preview; nothing was written. "
            "Review the change, rebuild the workspace and propose again",
            details={"delta_id": delta["delta_id"], "changed_files": moved},
        )
    before = deltas.delta_folder(store, ws.workspace_id) / f"{delta['delta_id']}.before.json"
    image = {
        "side": side_of(ws).to_json(),
        "unknowns": list(ws.unknowns.values()),
        "conflicts": list(ws.conflicts.values()),
    }
    before.write_text(json.dumps(image, ensure_ascii=False), encoding="utf-8")
    audit = AuditLog(ws.root, name=AUDIT_NAME)
    records = [
        {
            "file": a,
            "before_sha256": delta["files"][a]["sha256"],
            "after_sha256": delta["files"][a]["projected_sha256"],
        }
        for a in files
    ]
    try:
        write_all({root / a: (delta["files"][a]["original"], delta["files"][a]["projected"]) for a in files})
    except OSError as exc:
        audit.append(
            "apply_failed",
            delta_id=delta["delta_id"],
            workspace_id=ws.workspace_id,
            files=records,
            error=str(exc),
        )
        raise ExecutionFailed(
            f"projection.apply could not write ({exc}); every file of this apply was restored"
        ) from exc
    record = audit.append(
        "apply",
        delta_id=delta["delta_id"],
        workspace_id=ws.workspace_id,
        authority=delta["authority"],
        files=records,
    )
    delta["status"] = "applied"
    delta["apply"] = {
        "at": deltas.now(),
        "files": records,
        "audit_seq": record["seq"],
        "audit_hash": record["hash"],
    }
    deltas.save(store, delta)
    return Answer(
        data={
            "delta_id": delta["delta_id"],
            "status": "applied",
            "files": records,
            "audit": {"log": str(audit.path), "seq": record["seq"], "hash": record["hash"]},
            "next": "execution.run_tests, then verification.rebuild and verification.roundtrip",
        }
    )
