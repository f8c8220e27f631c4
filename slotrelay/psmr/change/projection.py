"""projection.preview and projection.apply: a delta's files as a diff, then on disk.

The rule: CONTRACTS.md#changes-go-through-a-delta.

Preview renders each changed file as a unified diff (`patch` for source files, `test` for test
modules, or `source`, the whole projected text), paged to the budget like every answer, and writes
no source file; it records the hashes it saw in the delta (in the store, never in the tree). Apply
needs the `source-write` capability for every file, and writes only while each file still has the
hash the preview saw. It trusts nothing the delta's record says it passed
(CONTRACTS.md#files-the-product-writes): it expands the delta's operations again on the files as they
are now, refuses if that does not give the texts the delta recorded (and previewed), and runs the seven
checks of delta.validate again, refusing a site to review the recorded validation did not accept; only
then:

1. every projected text goes to a temporary file beside its target, flushed and fsynced, in a folder
   reached from the granted root down through checked descriptors (`slotrelay.fsio`: no folder that
   is, or is swapped for, a symbolic link is followed, so nothing lands outside the root);
2. the temporaries are renamed over their targets within those same descriptors; if any step fails,
   every file already replaced gets its original text back (atomically too) and the apply answers
   EXECUTION_FAILED;
3. each apply is one record of a hash-chained audit log of its own in the tree's state folder
   (`psmr-apply.jsonl`, the pen's kind of chain: `slotrelay.audit_log.AuditLog`), held locked for the whole
   apply so that two applies of one delta cannot both write.

Before writing, the workspace as it stands (W) is kept beside the delta as a sealed record
(`<delta_id>.before.json`), so verification.roundtrip can compare W' - W after the rebuild.
"""

from __future__ import annotations

from pathlib import Path, PurePath
from typing import Any

from slotrelay import fsio
from slotrelay.audit_log import AuditLog
from slotrelay.psmr.change import delta as deltas
from slotrelay.psmr.change.validation import SHOWN, feasibility, run_checks, unaccepted
from slotrelay.psmr.errors import (
    ConflictRequiresReview,
    ExecutionFailed,
    InvalidQuery,
    UnsupportedProjection,
    ValidationFailed,
)
from slotrelay.psmr.grants import Grants
from slotrelay.psmr.ops.diff import side_of
from slotrelay.psmr.ops.queries import Answer
from slotrelay.psmr.workspace.store import Store, Workspace

PROJECTIONS = ("patch", "test", "source")
AUDIT_NAME = "psmr-apply"


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
                deltas.file_diff(a, delta["files"][a]["original"], delta["files"][a]["projected"])
                for a in files
                if deltas.is_test_module(delta["files"][a]["module"]) == test
            ]
        sections.append((name, items))
    delta["preview"] = {"at": deltas.now(), "hashes": {a: delta["files"][a]["sha256"] for a in files}}
    if delta["status"] == "validated":
        delta["status"] = "previewed"
    deltas.save(store, ws, delta)
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


def write_all(anchor: Path, texts: dict[str, tuple[str, str]]) -> None:
    """Replace each file's text atomically, each folder reached from `anchor` down through checked
    descriptors (`slotrelay.fsio`); on any failure put back every file already replaced.

    Parameters:
        anchor: the folder the writes may not leave (a granted root).
        texts: file, relative to `anchor` -> (original text, new text).

    Raises:
        OSError: the write failed (after the originals were restored); `fsio.RefusedPath` names a
            folder or file that is a symbolic link or not what it should be.
    """
    folders: dict[PurePath, fsio.CheckedDir] = {}
    temps: dict[str, tuple[fsio.CheckedDir, str, str]] = {}
    replaced: list[str] = []
    try:
        for relative, (_, new) in texts.items():
            parent, name = PurePath(relative).parent, PurePath(relative).name
            if parent not in folders:
                folders[parent] = fsio.open_dir(anchor, parent)
            folder = folders[parent]
            temps[relative] = (folder, folder.write_temp(name, new.encode("utf-8")), name)
        for relative, (folder, temporary, name) in temps.items():
            folder.replace(temporary, name)
            replaced.append(relative)
        for folder in folders.values():
            folder.sync()
    except OSError:
        for relative in replaced:
            folder, _, name = temps[relative]
            folder.write(name, texts[relative][0].encode("utf-8"))
        raise
    finally:
        for relative, (folder, temporary, _) in temps.items():
            if relative not in replaced:
                folder.unlink(temporary)
        for folder in folders.values():
            folder.close()


def validated_texts(ws: Workspace, store: Store, delta: dict[str, Any]) -> dict[str, Any]:
    """The delta checked again before a write: its operations expanded again on the files as they are
    now must give exactly the texts it recorded (the ones preview showed), those texts must pass the
    seven checks of delta.validate, and every site those checks leave to review must be one the
    recorded validation accepted (`accept_review`). Nothing a record says it passed is taken on trust.

    Returns:
        The validation just run (recorded in the delta by the caller).

    Raises:
        ValidationFailed: the texts differ from the recorded ones, a check fails, or a site to review
            was not accepted.
        ConflictRequiresReview: a file changed since the proposal.
    """
    _, files = deltas.plan(ws, delta["operations"])
    recorded = {a: f["projected"] for a, f in delta["files"].items()}
    differ = sorted(
        a for a in set(files) | set(recorded) if files.get(a, {}).get("projected") != recorded.get(a)
    )
    if differ:
        raise ValidationFailed(
            f"projection.apply: delta {delta['delta_id']}'s operations do not give the texts it recorded "
            f"for {', '.join(differ)}; nothing was written. Propose the change again",
            details={"delta_id": delta["delta_id"], "files": differ},
        )
    validation = run_checks(ws, store, delta, "projection.apply")
    validation.pop("strings")
    if validation["failed"]:
        raise ValidationFailed(
            f"projection.apply: delta {delta['delta_id']} fails {', '.join(validation['failed'])} on the "
            "files as they are now; nothing was written. The problems are in data.checks",
            details={"delta_id": delta["delta_id"], **validation},
        )
    sites, count = unaccepted(delta["validation"], validation)
    if count:
        raise ValidationFailed(
            f"projection.apply: delta {delta['delta_id']} leaves {count} site(s) to review on the files as "
            "they are now that delta.validate did not accept; nothing was written. Check them "
            "(data.needs_review), then delta.validate again (accept_review: true once checked)",
            details={
                "delta_id": delta["delta_id"],
                "needs_review": sites[:SHOWN],
                "needs_review_count": validation["needs_review_count"],
            },
        )
    return {**validation, "accepted_review": bool(validation["needs_review_count"])}


def apply(ws: Workspace, request: dict[str, Any], store: Store, grants: Grants) -> Answer:
    """projection.apply: validate a previewed delta again, then write it while every file has the
    previewed hash."""
    grants.require_write("projection.apply", [])
    delta = deltas.load(store, ws, request["delta_id"])
    deltas.require_current(ws, delta, "projection.apply")
    _require_applicable(delta)
    files = deltas.changed_files(delta)
    root = Path(ws.source_root)
    grants.require_write("projection.apply", [root / a for a in files])
    anchor = grants.write_root("projection.apply", root)
    audit = AuditLog(ws.root, name=AUDIT_NAME)
    with audit.locked():
        # Another apply of this delta may have written while this one waited for the log.
        if deltas.load(store, ws, delta["delta_id"])["apply"] is not None:
            raise InvalidQuery(f"delta {delta['delta_id']} was applied meanwhile; propose a new one")
        _require_previewed_hashes(root, delta, files)
        delta["validation"] = validated_texts(ws, store, delta)
        image = {
            "side": side_of(ws).to_json(),
            "unknowns": list(ws.unknowns.values()),
            "conflicts": list(ws.conflicts.values()),
        }
        deltas.save_image(store, ws, delta["delta_id"], image)
        records = [
            {
                "file": a,
                "before_sha256": delta["files"][a]["sha256"],
                "after_sha256": delta["files"][a]["projected_sha256"],
            }
            for a in files
        ]
        _write_projected(ws, delta, files, anchor=anchor, audit=audit, records=records)
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
        deltas.save(store, ws, delta)
    return Answer(
        data={
            "delta_id": delta["delta_id"],
            "status": "applied",
            "files": records,
            "audit": {"log": str(audit.path), "seq": record["seq"], "hash": record["hash"]},
            "next": "execution.run_tests, then verification.rebuild and verification.roundtrip",
        }
    )


def _require_applicable(delta: dict[str, Any]) -> None:
    """Refuse a delta applied already, one delta.validate did not pass, or one never previewed."""
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


def _require_previewed_hashes(root: Path, delta: dict[str, Any], files: list[str]) -> None:
    """Refuse when a file of the delta no longer has the hash projection.preview saw."""
    moved = deltas.changed_on_disk(
        root, ((artifact, delta["preview"]["hashes"].get(artifact)) for artifact in files)
    )
    if moved:
        raise ConflictRequiresReview(
            f"projection.apply: {', '.join(moved)} changed since projection.preview, or cannot be read "
            "as a regular file inside the root; nothing was written. Review the change, rebuild the "
            "workspace and propose again",
            details={"delta_id": delta["delta_id"], "changed_files": moved},
        )


def _write_projected(
    ws: Workspace,
    delta: dict[str, Any],
    files: list[str],
    *,
    anchor: Path,
    audit: AuditLog,
    records: list[dict[str, Any]],
) -> None:
    """Write the delta's projected texts under the granted root, all or none; a failed write that
    restored the originals is recorded in the audit log.

    Raises:
        ExecutionFailed: a file could not be written (every file of this apply is restored).
    """
    prefix = Path(ws.source_root).relative_to(anchor)
    try:
        write_all(
            anchor,
            {
                str(prefix / a): (delta["files"][a]["original"], delta["files"][a]["projected"])
                for a in files
            },
        )
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
    except ValueError as exc:
        raise ExecutionFailed(f"projection.apply could not write ({exc}); nothing was written") from exc
