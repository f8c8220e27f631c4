"""Slot files: atomic writes, guarded reads, and the babel JSONL dual-write.

Invariants (other agents and the watchdog sensor rely on them):
- Every slot, babel log, alert and run summary is written through `slotrelay.fsio`
  (CONTRACTS.md#files-the-product-writes): each folder from `/` down is opened without following a
  link, the file goes to a fresh `.<name>.<random>.tmp` beside the target, is fsynced and renamed over
  it within that folder, and the folder is fsynced (a routed input slot a resume rebuilds goes without
  fsync: `write_slot`). A reader sees the old document or the new one, never half of one. A slot
  path that is, or lies under, a symbolic link, or that holds a FIFO or a folder, is refused
  (`fsio.RefusedPath`, an OSError: `slot_unwritable` for the node), never followed.
- Readers ignore `.tmp` files and treat a missing, half-written or invalid document as "not there
  yet" (`None`), never as a crash: an agent outside the engine may write without renaming. A slot
  still half written HALF_WRITTEN_SECONDS after its last write is refused (`SlotInvalid`): its writer
  has stopped, and the chain must not wait for it for ever.
- Only a regular file is a slot. It is read with fsio's bounded reader (no link followed, on the
  file or a folder on its way; never blocking; at most MAX_SLOT_BYTES): a symlink, FIFO, socket,
  device or folder at a slot path is refused (`SlotInvalid`), never followed and never blocked on.
- An output slot's shape is checked in one place, `read_output_slot` (`OutputSlotShape`): every path
  that takes an agent's output (the sensor, its start-up reconcile, an external node's wait) gets the
  same verdict, naming the file and the field.
- An output slot document is `{"node_id", "status", "data", "error", "capabilities_used", "checks",
  "attempt", "updated_at", "produced_from"}`; an input slot written by a route is `{"status":
  "pending", "from_node", "route_id", "from_output", "data", "updated_at"}` (plus `loops` inside a
  rework loop), and a join's also holds `sources` (each source's route, data and `from_output`,
  `slotrelay.chain.routing`), its `data` being their merge, and is `waiting` until it is complete.
- Provenance (slotrelay.chain.provenance): `produced_from` is the `content_hash` of the input slot's
  bytes the output was made from, `from_output` the `content_hash` of the output slot's bytes a route
  handed on. `write_slot` returns the hash of what it wrote, so the writer never reads its file back.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from slotrelay import fsio
from slotrelay.chain.outcomes import OUTPUT_STATUSES
from slotrelay.errors import SlotrelayError
from slotrelay.timestamps import now_iso
from slotrelay.validation_text import model_problems

TMP_SUFFIX = ".tmp"
# Deeper documents are refused: the engine copies, hashes, dumps and checks slot data with
# recursive code (json, jsonschema, Prefect's parameter walk) that must never hit the recursion limit.
MAX_NESTING = 100
UTF8_BOM = b"\xef\xbb\xbf"  # json.loads reads a document after it, so a half one may follow it too
MAX_SLOT_BYTES = 64 * 1024 * 1024
# A writer that does not rename writes a slot of MAX_SLOT_BYTES in well under this; past it, it has stopped.
HALF_WRITTEN_SECONDS = 5.0
# What the engine creates beside an agent's slots stays as writable to the agent as its own files are.
FILE_MODE = 0o666


class SlotInvalid(SlotrelayError):
    """A slot file that is there but can never be taken as a slot (error type `slot_invalid`).

    Parameters:
        path: the slot file.
        problems: what is wrong, each naming the field (`capabilities_used.0: ...`) where there is one.
    """

    code = "slot_invalid"

    def __init__(self, path: str | Path, problems: list[str]) -> None:
        self.path = Path(path)
        self.problems = problems
        super().__init__(f"{path}: {'; '.join(problems)}")

    def __reduce__(self) -> tuple[type, tuple[Path, list[str]]]:
        return (type(self), (self.path, self.problems))


def content_hash(raw: bytes) -> str:
    """The sha256 of a slot file's bytes: what provenance records and the routing ledger keys on.

    Parameters:
        raw: the slot file's content.

    Returns:
        `sha256:<hex>`.
    """
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def _json_text(document: Any, *, indent: int | None = None) -> str:
    """JSON text that UTF-8 can encode: a lone surrogate (valid in JSON, not in UTF-8) stays escaped."""
    text = json.dumps(document, ensure_ascii=False, indent=indent)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(document, ensure_ascii=True, indent=indent)
    return text


def slot_bytes(document: Any) -> bytes:
    """The bytes a slot document is written as (`write_slot`, `write_json_atomic`): the one serialisation,
    so the hash of a document about to be written is the hash of the file it becomes.

    JSON indented by two spaces, UTF-8, one newline at the end. orjson writes it (json's C encoder
    cannot indent, and its pure-Python one cost up to 0.5 ms a slot); what orjson would write with
    another meaning than `json.dumps` (NaN and infinities become null; it refuses integers past 64
    bits, keys that are not strings, lone surrogates and nesting past 255) does not read back as the
    document, and is written by `json` instead.
    """
    try:
        data = orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        data = b""
    if data and orjson.loads(data) == document:
        return data
    return (_json_text(document, indent=2) + "\n").encode("utf-8")


def walked(path: str | Path) -> str:
    """A chain path as fsio reaches it: absolute (against the working folder, no link resolved), every
    folder from `/` down opened without following a link (`fsio.FS_ROOT`).

    The chain's folders are resolved when it is bound (slotrelay.chain.models), so a link met on the
    way is one the engine did not make: an agent's, in its slots folder.
    """
    return os.path.abspath(path)


def refusal(path: str | Path, refused: fsio.RefusedPath) -> str:
    """What a refused slot path is, in words: `is a FIFO, not a regular file`, or the folder on its way
    that is a link (or not a folder)."""
    kind = refused.kind if isinstance(refused, fsio.NotRegular) else "a symbolic link"
    if refused.filename == walked(path):
        return f"is {kind}, not a regular file"
    return f"cannot be reached: {refused.filename} is {kind}, not a folder (not followed)"


def make_folder(folder: str | Path) -> None:
    """Create a slot folder (and the folders above it) if missing, as fsio reaches it (`walked`).

    Raises:
        OSError: it cannot be created; `fsio.RefusedPath` when it, or a folder above it, is a link or
            not a folder.
    """
    with fsio.open_dir(fsio.FS_ROOT, walked(folder), create=True):
        pass


def _write_atomic(path: str | Path, data: bytes, *, sync: bool = True) -> None:
    """Replace the file whole through fsio: a fresh temporary file beside it, fsync, rename, folder fsync
    (without `sync`, no fsync: see `write_slot`).

    Raises:
        OSError: it cannot be written; `fsio.RefusedPath` when it, or a folder on its way, is a link or
            not what it should be (nothing is written through it).
    """
    fsio.write_file(fsio.FS_ROOT, walked(path), data, mode=FILE_MODE, sync=sync)


def write_json_atomic(path: str | Path, document: Any) -> Path:
    """Write a JSON document atomically (`_write_atomic`).

    Parameters:
        path: the target file; its folder is created if missing.
        document: anything `json.dumps` accepts.

    Returns:
        The target path.

    Raises:
        OSError: as `_write_atomic`.
    """
    path = Path(path)
    _write_atomic(path, slot_bytes(document))
    return path


def write_slot(path: str | Path, document: Any, *, sync: bool = True) -> str:
    """Write a slot document atomically (as `write_json_atomic`) and return the hash of its bytes.

    Parameters:
        sync: fsync the slot and its folder. Only a slot a resumed run writes again when a power cut
            has lost it goes without (`routing.rebuilt_on_resume`).

    Raises:
        OSError: the slot (or its folder) cannot be written, or is a link or not a regular file.
    """
    data = slot_bytes(document)
    _write_atomic(path, data, sync=sync)
    return content_hash(data)


def read_slot_bytes(path: str | Path) -> tuple[bytes, float] | None:
    """The bytes of a slot file and its write time, read from one open file; None when it is missing.

    Read through fsio's bounded reader: no link is followed (the file or a folder on its way), a
    FIFO is never blocked on, and only a regular file of at most MAX_SLOT_BYTES is read.

    Raises:
        SlotInvalid: the path holds something other than a regular file, a folder on its way is a link
            or not a folder, or the file is over MAX_SLOT_BYTES.
    """
    try:
        raw, status = fsio.read_file_status(fsio.FS_ROOT, walked(path), limit=MAX_SLOT_BYTES)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except fsio.RefusedPath as refused:
        raise SlotInvalid(path, [refusal(path, refused)]) from None
    except fsio.FileTooLarge:
        raise SlotInvalid(path, [f"is more than {MAX_SLOT_BYTES} bytes"]) from None
    except OSError as unusable:
        raise SlotInvalid(path, [f"cannot be opened: {unusable.strerror}"]) from None
    except ValueError as unusable:
        raise SlotInvalid(path, [f"cannot be opened: {unusable}"]) from None
    return raw, status.st_mtime


def nesting_depth_exceeds(value: Any, limit: int = MAX_NESTING) -> bool:
    """Whether a JSON value nests deeper than `limit` levels (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, dict | list):
            if depth > limit:
                return True
            children = current.values() if isinstance(current, dict) else current
            stack.extend((child, depth + 1) for child in children)
    return False


def parse_slot(path: str | Path, raw: bytes, *, written_at: float | None = None) -> dict[str, Any] | None:
    """A slot's bytes as a JSON object; None when they are not (yet) JSON, as a half-written file is.

    Parameters:
        written_at: the bytes' write time; with it, bytes still half written HALF_WRITTEN_SECONDS later
            are refused instead of waited on.

    Raises:
        SlotInvalid: complete JSON that is not an object, bytes that cannot begin one (not JSON, and not
            `{`), half of an object long after its last write, or nested deeper than MAX_NESTING.
    """
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        if raw.lstrip().removeprefix(UTF8_BOM).lstrip()[:1] not in (b"", b"{"):
            # Half of an object starts with `{`: anything else can never become a slot (text, YAML,
            # an array cut short), so the agent is told now instead of the chain waiting for ever.
            raise SlotInvalid(path, ["is not JSON, and no part of a JSON object: a slot is one"]) from None
        if written_at is not None and time.time() >= written_at + HALF_WRITTEN_SECONDS:
            stopped = (f"is half written: still not a complete JSON object {HALF_WRITTEN_SECONDS:g} s after"
                       " its last write (write a slot whole: a temporary file, then a rename)")
            raise SlotInvalid(path, [stopped]) from None
        return None
    except RecursionError:
        raise SlotInvalid(path, [f"nested deeper than {MAX_NESTING} levels"]) from None
    if not isinstance(document, dict):
        raise SlotInvalid(path, [f"is a JSON {type(document).__name__}, not an object"])
    # A document nests no deeper than it has `{` and `[` bytes (every object or array opens with one, in
    # each encoding json reads), so a slot with few of them is not walked: most slots, every node twice.
    if raw.count(b"{") + raw.count(b"[") > MAX_NESTING and nesting_depth_exceeds(document):
        raise SlotInvalid(path, [f"nested deeper than {MAX_NESTING} levels"])
    return document


def half_written_until(path: str | Path, *, since: float = 0.0) -> float | None:
    """When the half-written slot at `path` is refused, if its writer stops now (epoch seconds).

    None when the slot is missing, complete, refused already, or written before `since` (a reader
    that ignores older content has nothing to wait for): only a half-written one has a deadline.
    """
    try:
        found = read_slot_bytes(path)
        if found is None or found[1] < since or parse_slot(path, found[0]) is not None:
            return None
    except SlotInvalid:
        return None
    return found[1] + HALF_WRITTEN_SECONDS


def read_slot(path: str | Path) -> dict[str, Any] | None:
    """Read a slot document, or None when it is not there yet or can never be one.

    Parameters:
        path: the slot file.

    Returns:
        The JSON object; None for a `.tmp` file, a missing file, half-written or invalid JSON, JSON
        that is not an object, and anything `read_slot_bytes` or `parse_slot` refuses.
    """
    path = Path(path)
    if path.name.endswith(TMP_SUFFIX):
        return None
    try:
        found = read_slot_bytes(path)
        return parse_slot(path, found[0]) if found is not None else None
    except SlotInvalid:
        return None


class SlotErrorShape(BaseModel):
    """The `error` of a failed output slot."""

    model_config = ConfigDict(extra="allow", strict=True)

    error_type: str | None = None
    message: str | None = None


class OutputSlotShape(BaseModel):
    """The fields of an output slot the engine reads, with their types; other keys are the agent's own."""

    model_config = ConfigDict(extra="allow", strict=True)

    node_id: str
    status: str
    data: dict[str, Any] | None = None
    error: SlotErrorShape | None = None
    capabilities_used: list[str] = Field(default_factory=list)
    checks: dict[str, Any] = Field(default_factory=dict)
    attempt: int | None = None
    updated_at: str | None = None
    produced_from: str | None = None


@dataclass(frozen=True)
class OutputSlotRead:
    """An output slot as read: the document, the very bytes it was parsed from, and their write time."""

    document: dict[str, Any]
    raw: bytes
    mtime: float


def read_output_slot(path: str | Path) -> OutputSlotRead | None:
    """Read an output slot an agent (or the engine) wrote, checking its shape.

    Parameters:
        path: the output slot file.

    Returns:
        The slot as read; None when it is missing or not (yet) complete JSON.

    Raises:
        SlotInvalid: not a regular file, not a JSON object, half written for HALF_WRITTEN_SECONDS,
            nested too deep, or a field of the wrong type (`status` must be a string,
            `capabilities_used` a list of strings, ...), each problem naming its field.
    """
    found = read_slot_bytes(path)
    if found is None:
        return None
    document = output_slot_from_bytes(path, found[0], written_at=found[1])
    return OutputSlotRead(document, found[0], found[1]) if document is not None else None


def output_slot_from_bytes(path: str | Path, raw: bytes, *, written_at: float) -> dict[str, Any] | None:
    """An output slot's bytes, written at `written_at`, as a document of the right shape; None when
    not (yet) complete JSON.

    Raises:
        SlotInvalid: as `read_output_slot`.
    """
    document = parse_slot(path, raw, written_at=written_at)
    if document is None:
        return None
    try:
        OutputSlotShape.model_validate(document)
    except ValidationError as bad:
        raise SlotInvalid(path, model_problems(bad, limit=5)) from None
    return document


def output_slot_document(
    node_id: str,
    *,
    status: str,
    data: dict[str, Any],
    error: dict[str, Any] | None = None,
    capabilities_used: list[str] | None = None,
    checks: dict[str, bool] | None = None,
    attempt: int = 1,
    produced_from: str | None = None,
) -> dict[str, Any]:
    """An output slot document (see the module docstring for its shape).

    Parameters:
        produced_from: the hash of the input slot's bytes it was made from (None for a start node).

    Raises:
        ValueError: `status` is not completed, failed or skipped.
    """
    if status not in OUTPUT_STATUSES:
        raise ValueError(f"output slot status must be one of {OUTPUT_STATUSES}, not {status!r}")
    return {
        "node_id": node_id,
        "status": status,
        "data": data,
        "error": error,
        "capabilities_used": list(capabilities_used or []),
        "checks": dict(checks or {}),
        "attempt": attempt,
        "updated_at": now_iso(),
        "produced_from": produced_from,
    }


def input_slot_document(*, from_node: str, route_id: str, data: dict[str, Any],
                        from_output: str | None = None, loops: dict[str, int] | None = None,
                        status: str = "pending") -> dict[str, Any]:
    """The input slot a fired route writes for its target: `status: pending` and the upstream data.

    Parameters:
        from_output: the hash of the source's output slot bytes the data came from.
        loops: rework loops the data is inside, and how often each fired (`slotrelay.chain.routing`).
        status: `pending`, or `waiting` for a join still waiting for a source.
    """
    document: dict[str, Any] = {"status": status, "from_node": from_node, "route_id": route_id,
                                "from_output": from_output, "data": data, "updated_at": now_iso()}
    if loops:
        document["loops"] = loops
    return document


def ask_again(path: str | Path, *, attempt: int) -> float:
    """Write an input slot again, `pending` with this `attempt`, for an agent asked to try again.

    Returns:
        The new write time (epoch seconds): only an output written after it answers this attempt.
    """
    document = read_slot(path) or {"data": {}}
    write_json_atomic(path, {**document, "status": "pending", "attempt": attempt, "updated_at": now_iso()})
    return os.stat(path, follow_symlinks=False).st_mtime


def append_babel(path: str | Path, *, sender: str, recipients: list[str], kind: str, payload: Any) -> None:
    """Append one babel-compatible JSON line `{"ts", "from", "to", "type", "payload"}` and fsync it.

    One `write` of a whole line through fsio (no link followed, no FIFO blocked on), so concurrent
    tailers see whole lines.

    Raises:
        OSError: the log cannot be written; `fsio.RefusedPath` when it, or a folder on its way, is a
            link or not what it should be.
    """
    line = _json_text({"ts": now_iso(), "from": sender, "to": recipients, "type": kind, "payload": payload})
    fsio.append_line(fsio.FS_ROOT, walked(path), (line + "\n").encode("utf-8"), mode=FILE_MODE)
