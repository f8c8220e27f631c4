"""The sensor: watchdog on every slot folder of the watched chains, routing each finished output slot.

No polling loop anywhere: watchdog's observer delivers file events (inotify on Linux) to one handler
thread, which routes the slot the event names (`ChainRouter.route_output`), and the coalescer
requests the runs. On start the sensor reconciles each chain against its ledger before it trusts
events, and on stop (SIGINT) it finishes the event in hand, requests the runs still waiting and exits.

Key contracts:
- The observer is started BEFORE the reconcile, so no slot written during start-up is missed; the
  router's per-chain lock and the ledger make the event and the reconcile route it once.
- Events are hints, never facts: the handler re-reads the slot, so a lost, repeated or reordered
  event changes nothing.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterable
from pathlib import Path

from watchdog.events import (
    EVENT_TYPE_CLOSED,
    EVENT_TYPE_CREATED,
    EVENT_TYPE_MODIFIED,
    EVENT_TYPE_MOVED,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from slotrelay.routing_sensor.coalescer import RunCoalescer, StartRun
from slotrelay.routing_sensor.router import ChainRouter

logger = logging.getLogger("slotrelay.sensor")

_ROUTABLE_EVENTS = {EVENT_TYPE_CREATED, EVENT_TYPE_MODIFIED, EVENT_TYPE_MOVED, EVENT_TYPE_CLOSED}


class _SlotEventHandler(FileSystemEventHandler):
    """Maps a file event to the output slot it touches and routes that slot."""

    def __init__(self, sensor: SlotSensor) -> None:
        self._sensor = sensor

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory or event.event_type not in _ROUTABLE_EVENTS:
            return
        # An atomic write shows up as a move of the `.tmp` onto the slot: the slot is the destination.
        path = event.dest_path if event.event_type == EVENT_TYPE_MOVED else event.src_path
        self._sensor.on_path(Path(str(path)))


class SlotSensor:
    """Watches the output slots of several chains and routes them, exactly once, with runs coalesced.

    Parameters:
        routers: one `ChainRouter` per watched chain.
        start_run: starts one run of a chain at the given nodes (see `coalescer.StartRun`).
        window_seconds: the coalescing window for runs.
    """

    def __init__(self, routers: Iterable[ChainRouter], start_run: StartRun, *, window_seconds: float = 0.1) -> None:
        self.routers = list(routers)
        self.coalescer = RunCoalescer(start_run, window_seconds=window_seconds)
        self._by_path: dict[Path, list[tuple[ChainRouter, str]]] = {}
        for router in self.routers:
            for path, node_id in router.watched_slots().items():
                self._by_path.setdefault(path, []).append((router, node_id))
        self._observer = Observer()
        self._stop = threading.Event()

    @property
    def folders(self) -> list[Path]:
        """The folders watched (each non-recursively)."""
        return sorted({path.parent for path in self._by_path})

    def on_path(self, path: Path) -> None:
        """Route the output slot at `path`, if it is one the sensor watches (called per file event)."""
        for router, node_id in self._by_path.get(path, ()):
            self.coalescer.submit(router.ledger, router.route_safely(node_id))

    def start(self) -> None:
        """Watch, then reconcile every chain with its ledger, then request runs as targets are routed."""
        for folder in self.folders:
            folder.mkdir(parents=True, exist_ok=True)
            self._observer.schedule(_SlotEventHandler(self), str(folder), recursive=False)
        self._observer.start()
        self.coalescer.start()
        for router in self.routers:
            entries, unstarted = router.reconcile()
            for run in unstarted:
                self.coalescer.repeat(router.ledger, run)
            self.coalescer.submit(router.ledger, entries)
        logger.info("watching %d output slot(s) in %s", len(self._by_path), ", ".join(map(str, self.folders)))

    def stop(self) -> None:
        """Stop watching, let the event in hand finish, request every waiting run, and return."""
        self._stop.set()
        if self._observer.is_alive():
            self._observer.stop()
            self._observer.join()
        self.coalescer.close()

    def request_stop(self, *_: object) -> None:
        """Ask `run_until_stopped` to return (signal-handler compatible)."""
        self._stop.set()

    def run_until_stopped(self) -> None:
        """Start, block until SIGINT/SIGTERM (or `request_stop`), then stop cleanly."""
        previous = {sig: signal.signal(sig, self.request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.start()
            self._stop.wait()
        finally:
            self.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
