"""Keep a workspace current while its files change (`slotrelay psmr build PATH --watch`).

A one-shot build has no earlier resolution to replay, so a one-file update resolves the whole tree
again (networkx: about half a full build). A watcher is the process that keeps it, as mypy's daemon
or `tsc --watch` do: it resolves once when it starts, keeping the resolution in a `KeptResolutions`
of its own (`slotrelay.psmr.workspace.kept`), then updates the workspace after each change, replaying only
what the edit reaches (see `slotrelay.psmr.workspace.build`). It writes the store every reader loads (the MCP
server, the human view, `psmr call`), so they see each update once it is saved.

watchdog delivers the tree's file events (inotify on Linux; there is no polling loop). A burst of
events (an editor's save, a `git checkout`, a formatter over many files) makes one update: it starts
once no event about source has arrived for `quiet_s`, and events during an update make one more after
it. Events a build would not read are ignored: files other than `.py`, hidden folders, caches and
the store. An update that fails is reported and the watcher waits for the next change; the one after
it resolves in full, since a failed build leaves no resolution behind to replay.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from watchdog.events import (
    EVENT_TYPE_CLOSED,
    EVENT_TYPE_CREATED,
    EVENT_TYPE_DELETED,
    EVENT_TYPE_MODIFIED,
    EVENT_TYPE_MOVED,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from slotrelay.psmr.workspace.build import SKIP_DIRS, build
from slotrelay.psmr.workspace.kept import KeptResolutions
from slotrelay.psmr.workspace.store import Store

# Events that can change what a build reads (opening or reading a file cannot). A folder's other
# events are its entries changing, each of which has an event of its own.
_CHANGES = {EVENT_TYPE_CREATED, EVENT_TYPE_MODIFIED, EVENT_TYPE_MOVED, EVENT_TYPE_DELETED, EVENT_TYPE_CLOSED}
_FOLDER_CHANGES = {EVENT_TYPE_MOVED, EVENT_TYPE_DELETED}


class _SourceEvents(FileSystemEventHandler):
    def __init__(self, watcher: TreeWatcher) -> None:
        self._watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type not in (_FOLDER_CHANGES if event.is_directory else _CHANGES):
            return
        paths = (
            [event.src_path, event.dest_path] if event.event_type == EVENT_TYPE_MOVED else [event.src_path]
        )
        if any(self._watcher.is_source(Path(str(p)), folder=event.is_directory) for p in paths if p):
            self._watcher.changed()


class TreeWatcher:
    """Builds a workspace, then updates it after each change to its tree until interrupted.

    Parameters:
        root: the root to analyse, as `slotrelay.psmr.api.build_workspace` takes it.
        store: the store folder (default as in `build_workspace`).
        on_build: called with each build's summary (the first build's too).
        on_failure: called with the exception of a build that failed.
        quiet_s: how long the tree must stay quiet after an event before an update starts.
    """

    def __init__(
        self,
        root: Path,
        *,
        store: Path | None = None,
        on_build: Callable[[dict[str, Any]], None],
        on_failure: Callable[[Exception], None],
        quiet_s: float = 0.2,
    ) -> None:
        self.root = Path(root).expanduser().resolve()
        self.store = Store.open(store).path.resolve()
        self._store_option = store
        self._on_build = on_build
        self._on_failure = on_failure
        self._quiet_s = quiet_s
        self._changed = threading.Condition()
        self._last_event: float | None = None

    def is_source(self, path: Path, *, folder: bool) -> bool:
        """Whether a change at `path` can change what a build of the root reads."""
        if not path.is_relative_to(self.root) or path.is_relative_to(self.store):
            return False
        parts = path.relative_to(self.root).parts
        folders = parts if folder else parts[:-1]
        if not parts or any(p.startswith(".") or p in SKIP_DIRS for p in folders):
            return False
        return folder or path.suffix == ".py"

    def changed(self) -> None:
        """Note a change to the tree (called from watchdog's thread)."""
        with self._changed:
            self._last_event = time.monotonic()
            self._changed.notify()

    def run(self) -> None:
        """Watch the tree, build it, then update it after each change; returns on KeyboardInterrupt
        (Ctrl-C; the CLI maps SIGTERM to it too). The resolution kept between updates lives as long
        as the watch."""
        kept = KeptResolutions(1)
        observer = Observer()
        # Watching starts before the first build, so a change made while it runs makes an update.
        observer.schedule(_SourceEvents(self), str(self.root), recursive=True)
        observer.start()
        try:
            self._build(kept, start=True)
            while True:
                self._wait_for_quiet()
                self._build(kept, start=False)
        except KeyboardInterrupt:
            return
        finally:
            observer.stop()
            observer.join()

    def _wait_for_quiet(self) -> None:
        with self._changed:
            while self._last_event is None:
                self._changed.wait()
            while (left := self._last_event + self._quiet_s - time.monotonic()) > 0:
                self._changed.wait(left)
            self._last_event = None

    def _build(self, kept: KeptResolutions, *, start: bool) -> None:
        try:
            # Warm: the watcher's resolution follows the tree even when the store already holds the
            # change (another process saved it), so that the next update is replayed.
            summary = build(self.root, store=self._store_option, warm=True, kept=kept)
        except Exception as exc:  # noqa: BLE001 - one failed update must not end the watch
            self._on_failure(exc)
            return
        if start:
            # The start's resolution lives on: one full collection now moves it to the collector's
            # oldest generation, instead of two passes over it (3 s each on networkx) after the first
            # updates, delaying their answers.
            gc.collect()
        self._on_build(summary)
