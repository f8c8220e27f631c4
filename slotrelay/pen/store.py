"""Where a pen's files live under `--root`, and the moves that erase, keep, share and review make.

    <state>/trees/<root>/pen-staging/{pen_id}/                     a completed pen awaiting its decision
    <root>/.github/persona-brain/{persona_id}/pen-private/{pen_id}/  kept
    <root>/.github/persona-brain/{persona_id}/pen-notices/{pen_id}.json  what the registry told the persona
    <root>/factory/module-registry/inbox/{pen_id}/                 shared, waiting for review
    <root>/factory/module-registry/{accepted,rejected,observation}/{pen_id}/  after review

A pen's folder holds `code.<ext>`, `request.json`, `execution.json`, `output.json` (and `manifest.json`,
`review.json` in the registry). A staged pen is slotrelay's state, kept in the root's state folder
(`slotrelay.fsio.tree_state`), never in the root; what a decision publishes goes into the root, whose
folders are opened without following a link (CONTRACTS.md#files-the-product-writes). Files are
written atomically (tmp, fsync, rename) and folders appear by rename (a staged pen is copied into a
temporary folder beside its target first), so a reader never sees half a pen. Erase deletes the
staging folder: nothing of the pen is left except its audit records (hashes only).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from pathlib import Path
from typing import Any, Literal

from slotrelay import fsio
from slotrelay.pen.errors import InvalidPenRequest, PenError, PenNotFound

RegistryBucket = Literal["inbox", "accepted", "rejected", "observation"]
# The largest pen file read back (code, request, output, manifest, review, policy).
READ_LIMIT = 16 << 20


def staging_dir(root: str | Path, pen_id: str) -> Path:
    """The folder of a completed pen that waits for its decision (in the root's state folder)."""
    return fsio.tree_state(root) / "pen-staging" / pen_id


def private_dir(root: str | Path, persona_id: str, pen_id: str) -> Path:
    """Where `keep` puts a pen."""
    return Path(root) / ".github" / "persona-brain" / persona_id / "pen-private" / pen_id


def notice_path(root: str | Path, persona_id: str, pen_id: str) -> Path:
    """Where the registry's answer to a persona goes (MPP-E006 on rejection)."""
    return Path(root) / ".github" / "persona-brain" / persona_id / "pen-notices" / f"{pen_id}.json"


def registry_dir(root: str | Path, bucket: RegistryBucket, pen_id: str) -> Path:
    """A pen's folder in one of the registry's buckets."""
    return Path(root) / "factory" / "module-registry" / bucket / pen_id


def _anchor(root: str | Path, path: Path) -> Path:
    """The folder a pen's file is reached from: the root's state folder for a staged pen, else the root."""
    state = fsio.tree_state(root)
    return state if path.is_relative_to(state) else Path(root)


def write_json(root: str | Path, path: Path, value: Any) -> None:
    """Write JSON atomically (see `write_text`)."""
    write_text(root, path, json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")


def write_text(root: str | Path, path: Path, text: str) -> None:
    """Write a pen's file atomically: a fresh temporary file beside the target, fsync, rename.

    Parameters:
        root: the pen's root folder.
        path: the file, under the root or in its state folder.

    Raises:
        PenError: a folder on the way is a symbolic link or not a folder (nothing is written).
    """
    try:
        fsio.write_file(_anchor(root, path), path, text.encode("utf-8"))
    except fsio.RefusedPath as exc:
        raise PenError(f"cannot write {path}: {exc.filename} is {exc.strerror}") from exc


def read_text(root: str | Path, path: Path) -> str:
    """Read a pen's file: a regular file reached without following a link, within `READ_LIMIT`.

    Raises:
        PenNotFound: when it is missing.
        InvalidPenRequest: when it is a link, not a regular file, or too large.
    """
    try:
        return fsio.read_file(_anchor(root, path), path, limit=READ_LIMIT).decode("utf-8")
    except FileNotFoundError as exc:
        raise PenNotFound(f"{path} is missing") from exc
    except (fsio.RefusedPath, fsio.FileTooLarge) as exc:
        raise InvalidPenRequest(f"{exc.filename}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise InvalidPenRequest(f"{path}: not UTF-8 text ({exc.reason})") from exc


def read_json(root: str | Path, path: Path) -> Any:
    """Read a JSON file a pen wrote (see `read_text`).

    Raises:
        PenNotFound: when it is missing.
        InvalidPenRequest: when it is not JSON (say, edited by hand in the registry inbox), or not a
            regular file.
    """
    text = read_text(root, path)
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidPenRequest(f"{path}: not JSON ({exc})") from exc


def move_dir(root: str | Path, source: Path, target: Path) -> Path:
    """Move a pen's folder to `target` under the root: by rename within the root (a registry bucket to
    another), or, for a staged pen, by copying its files into a fresh folder beside the target,
    renaming that over the target's name and removing the staging folder.

    Raises:
        PenNotFound: when the source folder is missing.
        PenError: when the target exists already (a pen is never overwritten), or a folder on the way
            is a symbolic link or not a folder.
    """
    base = Path(root)
    try:
        with fsio.open_dir(base, target.parent, create=True) as parent:
            if parent.lstat(target.name) is not None:
                raise PenError(f"{target} exists already: a pen's folder is never overwritten")
            if _anchor(root, source) == base:
                with fsio.open_dir(base, source.parent) as origin:
                    if origin.lstat(source.name) is None:
                        raise PenNotFound(f"{source} is missing")
                    with origin.child(source.name):
                        pass  # a folder, not a link
                    os.rename(source.name, target.name, src_dir_fd=origin.fd, dst_dir_fd=parent.fd)
                parent.sync()
                return target
            _publish(root, source, parent, target.name)
    except FileNotFoundError as exc:
        raise PenNotFound(f"{source} is missing") from exc
    except fsio.RefusedPath as exc:
        raise PenError(f"cannot move {source} to {target}: {exc.filename} is {exc.strerror}") from exc
    erase_dir(source)
    return target


def _publish(root: str | Path, source: Path, parent: fsio.CheckedDir, name: str) -> None:
    """Copy a staged pen's files into `parent` as `name`, through a temporary folder renamed at the end."""
    files = {entry: read_text(root, source / entry) for entry in _entries(root, source)}
    temporary = f".{name}.{secrets.token_hex(6)}.tmp"
    try:
        with parent.child(temporary, create=True) as folder:
            for entry, text in files.items():
                folder.write(entry, text.encode("utf-8"))
        os.rename(temporary, name, src_dir_fd=parent.fd, dst_dir_fd=parent.fd)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True, dir_fd=parent.fd)
        raise
    parent.sync()


def _entries(root: str | Path, source: Path) -> list[str]:
    with fsio.open_dir(_anchor(root, source), source) as folder:
        return folder.names()


def erase_dir(folder: Path) -> None:
    """Delete a staged pen's folder and everything in it (erase)."""
    shutil.rmtree(folder, ignore_errors=True)
