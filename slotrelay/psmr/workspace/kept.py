"""The resolutions a long-lived process keeps, so that its next update of a workspace replays one.

A process that updates workspaces again and again (the MCP server's registry, a watcher:
`slotrelay.psmr.workspace.watch`) creates a `KeptResolutions` and hands it to every build it makes
(`build(..., kept=...)`); the build takes the workspace's last resolution out of it, replays it where
the edit reaches (`relink`), and puts the new one back. A build given none keeps nothing, and its
resolution skips the records a replay needs, which add about a third to its time. Each process owns
its own: two processes on one workspace each keep theirs, and a build finds by content key what
changed since the one it holds, whoever saved the store in between.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slotrelay.psmr.analysis.record import ResolutionRecord
    from slotrelay.psmr.workspace.graph import Assembled

# A workspace, as a process keeps its resolution: (store folder, workspace id).
KeptKey = tuple[str, str]


@dataclass
class Resolved:
    """A workspace's last resolution in this process: the content keys of the facts it read (by
    module), its record, which an update replays (`relink`; None when it cannot be replayed), and the
    graph's parts (with the facts they were assembled from), which it assembles again only where their
    module's facts or resolution changed. A resolution read back from the store
    (`slotrelay.psmr.workspace.replay`) has no parts: the update assembles every module."""

    version: str
    keys: dict[str, str]
    record: ResolutionRecord | None
    assembled: Assembled | None


class KeptResolutions:
    """The last resolution of the `count` workspaces built most recently with it, for their next update.

    Threads share it (the MCP server answers calls side by side); a lock guards the table, and a
    build takes a workspace's resolution out while it updates it. A kept resolution of networkx (580
    files) holds about 0.75 GB.

    Parameters:
        count: how many workspaces' resolutions to keep (the least recently built go first).

    Raises:
        ValueError: count is less than 1.
    """

    def __init__(self, count: int = 1) -> None:
        if count < 1:
            raise ValueError(f"count must be at least 1 (a process that keeps none passes none), got {count}")
        self.count = count
        self._table: OrderedDict[KeptKey, Resolved] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: KeptKey) -> Resolved | None:
        """The resolution kept of a workspace, left in place."""
        with self._lock:
            return self._table.get(key)

    def take(self, key: KeptKey) -> Resolved | None:
        """The resolution kept of a workspace, taken out (the build that takes it puts the next back)."""
        with self._lock:
            return self._table.pop(key, None)

    def put(self, key: KeptKey, resolved: Resolved) -> None:
        """Keep a workspace's resolution, as the most recent; past `count`, the oldest goes."""
        with self._lock:
            self._table[key] = resolved
            self._table.move_to_end(key)
            while len(self._table) > self.count:
                self._table.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._table)
