"""Waiting for a slot without polling: the sensor's file events, for an agent's `node_inbox(wait_s=N)`.

`SlotWaiter.wait(folder, ready, timeout)` returns as soon as `ready()` holds, re-asking it on every file
event in `folder` (watchdog: inotify on Linux, the events `slotrelay watch` routes on), or when the
timeout runs out. As in the sensor, an event is a hint, never a fact: `ready` re-reads the slots.

Key contracts:
- The observer runs only while someone waits: the first waiter starts it, the last one to leave stops
  it, so an idle server holds no thread and no inotify watch.
- A folder is watched before `ready` is first asked, so a slot written between the two is not missed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver, ObservedWatch


class _Wake(FileSystemEventHandler):
    def __init__(self, changed: threading.Condition) -> None:
        self._changed = changed

    def on_any_event(self, event: FileSystemEvent) -> None:
        with self._changed:
            self._changed.notify_all()


class SlotWaiter:
    """Waits on slot folders for whoever asks, with one observer shared by every wait in progress."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._observer: BaseObserver | None = None
        self._watches: dict[Path, tuple[ObservedWatch, int]] = {}
        self._waiting = 0

    def wait(self, folder: Path, ready: Callable[[], bool], timeout: float) -> bool:
        """Block until `ready()` holds or `timeout` seconds have passed.

        Parameters:
            folder: the folder whose file events may make `ready` hold (created if missing, as the
                sensor creates the slots folders it watches).
            ready: re-reads the slots; called once now and after every event in `folder`.
            timeout: the most seconds to wait.

        Returns:
            Whether `ready()` held.
        """
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self._enter(folder.resolve())
        try:
            deadline = time.monotonic() + timeout
            with self._changed:
                while not ready():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._changed.wait(left)
                return True
        finally:
            self._leave(folder.resolve())

    def _enter(self, folder: Path) -> None:
        with self._changed:
            if self._observer is None:
                self._observer = Observer()
                self._observer.start()
            watch, count = self._watches.get(folder, (None, 0))
            if watch is None:
                watch = self._observer.schedule(_Wake(self._changed), str(folder), recursive=False)
            self._watches[folder] = (watch, count + 1)
            self._waiting += 1

    def _leave(self, folder: Path) -> None:
        stopping: BaseObserver | None = None
        with self._changed:
            watch, count = self._watches[folder]
            if count == 1:
                del self._watches[folder]
                if self._observer is not None:
                    self._observer.unschedule(watch)
            else:
                self._watches[folder] = (watch, count - 1)
            self._waiting -= 1
            if self._waiting == 0 and self._observer is not None:
                stopping, self._observer = self._observer, None
        if stopping is not None:
            # Outside the lock: the observer's threads may be delivering an event that takes it.
            stopping.stop()
            stopping.join()
