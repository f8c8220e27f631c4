"""Where a pen's files live under `--root`, and the moves that erase, keep, share and review make.

    <root>/.slotrelay/pen-staging/{pen_id}/                       a completed pen awaiting its decision
    <root>/.github/persona-brain/{persona_id}/pen-private/{pen_id}/  kept
    <root>/.github/persona-brain/{persona_id}/pen-notices/{pen_id}.json  what the registry told the persona
    <root>/factory/module-registry/inbox/{pen_id}/                 shared, waiting for review
    <root>/factory/module-registry/{accepted,rejected,observation}/{pen_id}/  after review

A pen's folder holds `code.<ext>`, `request.json`, `execution.json`, `output.json` (and `manifest.json`,
`review.json` in the registry). Files are written atomically (tmp, fsync, rename) and folders move by
rename, so a reader never sees half a pen. Erase deletes the staging folder: nothing of the pen is
left except its audit records (hashes only).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Literal

from slotrelay.pen.errors import InvalidPenRequest, PenError, PenNotFound

RegistryBucket = Literal["inbox", "accepted", "rejected", "observation"]


def staging_dir(root: str | Path, pen_id: str) -> Path:
    """The folder of a completed pen that waits for its decision."""
    return Path(root) / ".slotrelay" / "pen-staging" / pen_id


def private_dir(root: str | Path, persona_id: str, pen_id: str) -> Path:
    """Where `keep` puts a pen."""
    return Path(root) / ".github" / "persona-brain" / persona_id / "pen-private" / pen_id


def notice_path(root: str | Path, persona_id: str, pen_id: str) -> Path:
    """Where the registry's answer to a persona goes (MPP-E006 on rejection)."""
    return Path(root) / ".github" / "persona-brain" / persona_id / "pen-notices" / f"{pen_id}.json"


def registry_dir(root: str | Path, bucket: RegistryBucket, pen_id: str) -> Path:
    """A pen's folder in one of the registry's buckets."""
    return Path(root) / "factory" / "module-registry" / bucket / pen_id


def write_json(path: Path, value: Any) -> None:
    """Write JSON atomically: a `.tmp` beside the target, fsync, rename."""
    write_text(path, json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")


def write_text(path: Path, text: str) -> None:
    """Write text atomically: a `.tmp` beside the target, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    """Read a JSON file a pen wrote.

    Raises:
        PenNotFound: when it is missing.
        InvalidPenRequest: when it is not JSON (say, edited by hand in the registry inbox).
    """
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise PenNotFound(f"{path} is missing") from exc
    except ValueError as exc:
        raise InvalidPenRequest(f"{path}: not JSON ({exc})") from exc


def move_dir(source: Path, target: Path) -> Path:
    """Move a pen's folder by rename (same file system), creating the target's parent.

    Raises:
        PenNotFound: when the source folder is missing.
        PenError: when the target exists already (a pen is never overwritten).
    """
    if not source.is_dir():
        raise PenNotFound(f"{source} is missing")
    if target.exists():
        raise PenError(f"{target} exists already: a pen's folder is never overwritten")
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(source, target)
    return target


def erase_dir(folder: Path) -> None:
    """Delete a pen's folder and everything in it (erase)."""
    shutil.rmtree(folder, ignore_errors=True)
