"""An append-only, hash-chained audit log in a tree's state folder, shared by the pen and PSMR.

The pen keeps its calls, transitions and reviews in `pen-audit.jsonl` (the default name), and PSMR's
`projection.apply` keeps each apply in `psmr-apply.jsonl`: the same chain under another name, so the
log lives here, below both. The log of a root lives in slotrelay's state folder, keyed by the root's
resolved path (`slotrelay.fsio.tree_state`), never in the root: a root can be a cloned repository, and
one that ships `.slotrelay/pen-audit.head.tmp` as a link must not get a file overwritten through it
(CONTRACTS.md#files-the-product-writes). Its files are written through `slotrelay.fsio`.

Invariants (they break silently if forgotten):
- One JSON object per line. Each record holds `seq` (1, 2, ...), `prev_hash` (the previous record's
  `hash`, 64 zeros for the first) and `hash` = sha256 of the record's canonical JSON without `hash`.
  Changing, inserting, reordering or deleting a record breaks the chain at that line.
- Cutting records off the end leaves a valid chain, so the last `seq` and `hash` are also kept in
  `<name>.head`; `verify` compares the two.
- Appends (and read-check-append sequences such as state transitions) hold an exclusive `flock` on
  `<name>.lock`, so two writers, in two processes or two threads, never fork the chain.
- The log and the head are read without following a link and without blocking (`slotrelay.fsio`), the
  head within a size limit.
- Records hold hashes of the intent and code, never the texts: an erased pen leaves only these.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slotrelay import fsio
from slotrelay.timestamps import now_iso

GENESIS = "0" * 64
# A head is one short JSON object.
HEAD_LIMIT = 4096


class _PathLock:
    """The in-process side of one log's lock: threads queue on the RLock, and the depth (per thread,
    shared by every `AuditLog` of the same file) says whether this thread already holds the flock."""

    def __init__(self) -> None:
        self.rlock = threading.RLock()
        self.local = threading.local()


_path_locks: dict[str, _PathLock] = {}
_path_locks_guard = threading.Lock()


def sha256_text(text: str) -> str:
    """The hex sha256 of a text's UTF-8 bytes (the seed's intent_hash and code_hash)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _record_hash(record: dict[str, Any]) -> str:
    body = {key: value for key, value in record.items() if key != "hash"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass
class AuditReport:
    """What `verify` found: the number of records and every break in the chain."""

    path: str
    records: int = 0
    problems: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the chain is whole and matches its head."""
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        """The report as `slotrelay pen audit verify --json` prints it."""
        return {"path": self.path, "ok": self.ok, "records": self.records, "problems": self.problems}


class AuditLog:
    """The audit log of one root.

    Parameters:
        root: the pen's root folder (or an analysed tree); the log lives in its state folder,
            `slotrelay.fsio.tree_state(root)`.
        name: the log's file stem; another name keeps another chain beside the pen's (PSMR's
            `projection.apply` keeps `psmr-apply`).
    """

    def __init__(self, root: str | Path, *, name: str = "pen-audit") -> None:
        self.folder = fsio.tree_state(root)
        self.path = self.folder / f"{name}.jsonl"
        self.head_path = self.folder / f"{name}.head"
        self.lock_path = self.folder / f"{name}.lock"
        key = str(self.path)
        with _path_locks_guard:
            self._lock = _path_locks.setdefault(key, _PathLock())

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the log exclusively (re-entrant within a thread) for a read-check-append sequence."""
        local = self._lock.local
        with self._lock.rlock:
            depth = getattr(local, "depth", 0)
            if depth:
                local.depth = depth + 1
                try:
                    yield
                finally:
                    local.depth -= 1
                return
            with fsio.open_dir(self.folder, ".", create=True) as folder:
                lock_fd = os.open(
                    self.lock_path.name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                    dir_fd=folder.fd,
                )  # fmt: skip
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX)
                local.depth = 1
                try:
                    yield
                finally:
                    local.depth = 0
                    fcntl.flock(lock_fd, fcntl.LOCK_UN)
            finally:
                os.close(lock_fd)

    def _head(self) -> tuple[int, str]:
        try:
            head = json.loads(fsio.read_file(self.folder, self.head_path.name, limit=HEAD_LIMIT))
            return int(head["seq"]), str(head["hash"])
        except FileNotFoundError:
            return 0, GENESIS

    def _lines(self) -> Iterator[str]:
        try:
            fd = fsio.open_regular(self.folder, self.path.name)
        except FileNotFoundError:
            return
        with open(fd, encoding="utf-8", errors="replace", newline="\n") as log:
            for line in log:
                yield line.rstrip("\n")

    def append(self, event: str, **fields: Any) -> dict[str, Any]:
        """Append one record and return it (with its `syslog_id`, `seq` and hashes).

        Parameters:
            event: what happened ("call", "transition", "review", ...).
            **fields: the record's content (JSON-serialisable).

        Returns:
            The record as written.
        """
        with self.locked():
            seq, prev_hash = self._head()
            record: dict[str, Any] = {
                "seq": seq + 1,
                "syslog_id": f"SL-{uuid.uuid4().hex[:16]}",
                "ts": now_iso(),
                "event": event,
                **fields,
                "prev_hash": prev_hash,
            }
            record["hash"] = _record_hash(record)
            line = json.dumps(record, sort_keys=True, ensure_ascii=False, default=str) + "\n"
            fsio.append_line(self.folder, self.path.name, line.encode("utf-8"))
            head = json.dumps({"seq": record["seq"], "hash": record["hash"]})
            fsio.write_file(self.folder, self.head_path.name, head.encode("utf-8"))
            return record

    def records(self) -> Iterator[dict[str, Any]]:
        """Every record in order (lines that are not JSON objects are skipped; `verify` reports them)."""
        for line in self._lines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                yield record

    def records_of(self, pen_id: str) -> list[dict[str, Any]]:
        """The records about one pen, in order."""
        return [record for record in self.records() if record.get("pen_id") == pen_id]

    def verify(self) -> AuditReport:
        """Check the whole chain and the head.

        Returns:
            A report listing each broken line (bad JSON, wrong seq, broken link, altered record,
            records missing at the end).
        """
        report = AuditReport(path=str(self.path))
        expected_prev, expected_seq = GENESIS, 1
        lines = list(self._lines())
        for number, line in enumerate(lines, start=1):
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if not isinstance(record, dict):
                report.problems.append({"line": number, "problem": "not a JSON object"})
                continue
            report.records += 1
            if record.get("seq") != expected_seq:
                report.problems.append(
                    {
                        "line": number,
                        "problem": f"seq is {record.get('seq')}, expected {expected_seq} "
                        "(a record was removed or inserted)",
                    }
                )
            if record.get("prev_hash") != expected_prev:
                report.problems.append(
                    {"line": number, "problem": "prev_hash does not match the previous record"}
                )
            if record.get("hash") != _record_hash(record):
                report.problems.append({"line": number, "problem": "record was changed (hash mismatch)"})
            expected_prev = str(record.get("hash"))
            seq = record.get("seq")
            expected_seq = (seq if isinstance(seq, int) else expected_seq) + 1
        head_seq, head_hash = self._head()
        if head_seq != expected_seq - 1 or (head_seq and head_hash != expected_prev):
            report.problems.append(
                {
                    "line": len(lines),
                    "problem": f"the head says {head_seq} records ending in {head_hash[:12]}; "
                    f"the log ends at seq {expected_seq - 1} (records were cut off or the head was changed)",
                }
            )
        return report
