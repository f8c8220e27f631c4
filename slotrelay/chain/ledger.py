"""The routing ledger: what the sensor has routed, kept beside the slots, append-only.

The sensor keeps no state in memory that matters; this file is its memory. Each line is one JSON
object, one of three kinds:

    {"kind": "routed",  "chain_id", "route_id", "source_hash", "from_node", "to_node",
                        "input_slot", "starts", "at"}
                                                  a route fired: its input slot was written; `starts`
                                                  false when its target is a join still waiting
    {"kind": "run",     "chain_id", "batch_id", "start_nodes", "keys", "at"}
                                                  a run is about to be started for these routes
    {"kind": "started", "chain_id", "batch_id", "flow_run_id", "at"}
                                                  the run was created
    {"kind": "babel",   "chain_id", "node_id", "source_hash", "at"}
                                                  an agent's output was dual-written to its babel log

Key contracts (they break silently if changed):
- A route is identified by `(chain_id, route_id, source_hash)`: the same output content routes once,
  a new content routes again.
- Lines are written in the order the work happens (input slot, then `routed`; `run`, then the run,
  then `started`), so after a crash at any point the ledger says what is left to do.
- A `run` line's batch_id is the idempotency key given to the run request: repeating an unfinished
  request after a crash cannot create a second run.
- A torn last line (the process was killed mid-write) is ignored on reading and fenced off by a
  newline before the next append.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from slotrelay import fsio
from slotrelay.chain.slots import walked
from slotrelay.errors import EnvironmentMissing

LEDGER_FILE_NAME = ".slotrelay-routing-ledger.jsonl"
# A ledger is read whole when a sensor or run opens it; one line is about 300 bytes.
LEDGER_LIMIT = 256 * 1024 * 1024


def route_key(chain_id: str, route_id: str, source_hash: str) -> str:
    """The identity of one firing of a route on one output content."""
    return f"{chain_id}|{route_id}|{source_hash}"


def batch_id_for(keys: Iterable[str]) -> str:
    """A batch id that depends only on the route keys in it, so a repeat after a crash gets the same id."""
    digest = hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()
    return f"slotrelay-{digest[:32]}"


def _now() -> str:
    return datetime.now(UTC).isoformat()


@dataclass(frozen=True)
class RoutedEntry:
    """One route that fired: its downstream input slot was written."""

    chain_id: str
    route_id: str
    source_hash: str
    from_node: str
    to_node: str
    input_slot: str
    at: str
    # False when the target is a join still waiting for a source: the firing that completes it starts it.
    starts: bool = True

    @property
    def key(self) -> str:
        return route_key(self.chain_id, self.route_id, self.source_hash)


@dataclass
class PendingRun:
    """A run the ledger says was requested and not yet confirmed started."""

    chain_id: str
    batch_id: str
    start_nodes: list[str]
    keys: list[str] = field(default_factory=list)


class RoutingLedger:
    """An append-only JSON-lines file recording routes fired and runs started.

    The in-memory index is only a cache of the file, rebuilt on open; nothing is known that the file
    does not say. Appends are serialised by a lock and fsynced, so a line that was appended survives a
    `kill -9` of the sensor. The file is read and appended through fsio, as slots are: a ledger that is a
    link, a FIFO or a folder is refused, never followed.

    Parameters:
        path: the ledger file; created (with its folder) on the first append.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._routed: dict[str, RoutedEntry] = {}
        self._batched: set[str] = set()
        self._runs: dict[str, PendingRun] = {}
        self._started: dict[str, str] = {}
        self._babel: set[str] = set()
        self._fenced = False
        for record in self._read_records():
            self._index(record)

    # -- reading -----------------------------------------------------------------------------

    def _read_records(self) -> Iterator[dict[str, Any]]:
        try:
            raw = fsio.read_file(fsio.FS_ROOT, walked(self.path), limit=LEDGER_LIMIT)
        except (FileNotFoundError, NotADirectoryError):
            return
        except (fsio.RefusedPath, fsio.FileTooLarge) as refused:
            raise EnvironmentMissing(f"the routing ledger {self.path} cannot be read: "
                                     f"{refused.filename} is {refused.strerror}") from None
        for line in raw.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                # A torn line from a killed writer: the work it described is redone by reconcile.
                continue
            if isinstance(record, dict) and "kind" in record:
                yield record

    def _index(self, record: dict[str, Any]) -> None:
        kind = record.get("kind")
        try:
            if kind == "routed":
                # Lines written before `starts` existed started their target.
                entry = RoutedEntry(**{name: record[name] for name in RoutedEntry.__dataclass_fields__
                                       if name in record or name != "starts"})
                self._routed[entry.key] = entry
            elif kind == "run":
                run = PendingRun(
                    record["chain_id"], record["batch_id"], list(record["start_nodes"]), list(record["keys"])
                )
                self._runs[run.batch_id] = run
                self._batched.update(run.keys)
            elif kind == "started":
                self._started[record["batch_id"]] = record["flow_run_id"]
            elif kind == "babel":
                self._babel.add(f"{record['chain_id']}|{record['node_id']}|{record['source_hash']}")
        except (KeyError, TypeError):
            return

    # -- queries -----------------------------------------------------------------------------

    def has_routed(self, chain_id: str, route_id: str, source_hash: str) -> bool:
        """Whether this route already fired for this output content."""
        with self._lock:
            return route_key(chain_id, route_id, source_hash) in self._routed

    def routed_entries(self, chain_id: str | None = None) -> list[RoutedEntry]:
        """Every route that fired, in ledger order (optionally for one chain)."""
        with self._lock:
            return [e for e in self._routed.values() if chain_id is None or e.chain_id == chain_id]

    def unbatched(self, chain_id: str) -> list[RoutedEntry]:
        """Routes of a chain whose target no run has been requested for yet."""
        with self._lock:
            return [
                e for e in self._routed.values() if e.chain_id == chain_id and e.key not in self._batched
            ]

    def is_batched(self, key: str) -> bool:
        """Whether a run was already requested for this route key."""
        with self._lock:
            return key in self._batched

    def unstarted_runs(self, chain_id: str) -> list[PendingRun]:
        """Runs requested for a chain that the ledger does not confirm as created."""
        with self._lock:
            return [
                r for r in self._runs.values() if r.chain_id == chain_id and r.batch_id not in self._started
            ]

    def started_runs(self) -> dict[str, str]:
        """batch_id -> flow_run_id of every run confirmed created."""
        with self._lock:
            return dict(self._started)

    # -- appends -----------------------------------------------------------------------------

    def record_routed(self, entries: list[RoutedEntry]) -> None:
        """Append the routes that fired for one output slot, after their input slots were written."""
        records = [{"kind": "routed", **e.__dict__} for e in entries]
        with self._lock:
            self._append(records)
            for record in records:
                self._index(record)

    def record_run(self, chain_id: str, start_nodes: list[str], keys: list[str]) -> PendingRun:
        """Append that a run is about to be requested for these routes; returns it with its batch id."""
        run = PendingRun(chain_id, batch_id_for(keys), sorted(set(start_nodes)), sorted(keys))
        record = {"kind": "run", **run.__dict__, "at": _now()}
        with self._lock:
            self._append([record])
            self._index(record)
        return run

    def has_babel(self, chain_id: str, node_id: str, source_hash: str) -> bool:
        """Whether this output content was already dual-written to the node's babel log."""
        with self._lock:
            return f"{chain_id}|{node_id}|{source_hash}" in self._babel

    def record_babel(self, chain_id: str, node_id: str, source_hash: str) -> None:
        """Append that an output content was dual-written to its node's babel log."""
        record = {"kind": "babel", "chain_id": chain_id, "node_id": node_id, "source_hash": source_hash,
                  "at": _now()}
        with self._lock:
            self._append([record])
            self._index(record)

    def record_started(self, run: PendingRun, flow_run_id: str) -> None:
        """Append that the run of a batch was created."""
        record = {"kind": "started", "chain_id": run.chain_id, "batch_id": run.batch_id,
                  "flow_run_id": flow_run_id, "at": _now()}
        with self._lock:
            self._append([record])
            self._index(record)

    def _append(self, records: list[dict[str, Any]]) -> None:
        """Append whole lines through fsio (no link followed, no FIFO blocked on) and fsync them.

        Raises:
            OSError: the ledger cannot be written; `fsio.RefusedPath` when it, or a folder on its way,
                is a link or not a regular file.
        """
        if not records:
            return
        payload = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
        folders, name = os.path.split(walked(self.path))
        with fsio.open_dir(fsio.FS_ROOT, folders, create=True) as folder:
            if not self._fenced:
                # Only the file as found on open can end in a torn line; our own appends end in "\n".
                if not self._ends_with_newline(folder, name):
                    payload = "\n" + payload
                self._fenced = True
            folder.append(name, payload.encode(), mode=0o644)

    @staticmethod
    def _ends_with_newline(folder: fsio.CheckedDir, name: str) -> bool:
        """Whether the ledger is empty, missing or ends in a newline (a torn last line does not)."""
        try:
            fd = folder.open_regular(name)
        except FileNotFoundError:
            return True
        try:
            size = os.fstat(fd).st_size
            return size == 0 or os.pread(fd, 1, size - 1) == b"\n"
        finally:
            os.close(fd)


def new_routed_entry(
    *, chain_id: str, route_id: str, source_hash: str, from_node: str, to_node: str, input_slot: str,
    starts: bool = True,
) -> RoutedEntry:
    """A `routed` entry stamped now (UTC)."""
    return RoutedEntry(chain_id, route_id, source_hash, from_node, to_node, input_slot, _now(), starts)
