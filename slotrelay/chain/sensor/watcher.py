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
- The only clocks are armed from slots' own write times (so a restart re-arms them where they were),
  after the start-up reconcile and after every event: one per external node waiting for its agent
  past its `timeout_seconds`, and one per output slot left half written (refused HALF_WRITTEN_SECONDS
  after its last write: a writer that stops sends no more events). When one fires, the router
  re-reads the slots before acting.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
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

from slotrelay.chain.sensor.coalescer import RunCoalescer, StartRun
from slotrelay.chain.sensor.router import ChainRouter

logger = logging.getLogger(__name__)

_ROUTABLE_EVENTS = {EVENT_TYPE_CREATED, EVENT_TYPE_MODIFIED, EVENT_TYPE_MOVED, EVENT_TYPE_CLOSED}
# A node's clocks: its agent's `timeout_seconds`, and its output slot left half written.
_TIMEOUT, _HALF_WRITTEN = "timeout", "half_written"


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

    def __init__(self, routers: Iterable[ChainRouter], start_run: StartRun, *,
                 window_seconds: float = 0.1) -> None:
        self.routers = list(routers)
        self.coalescer = RunCoalescer(start_run, window_seconds=window_seconds)
        self._by_path: dict[Path, list[tuple[ChainRouter, str]]] = {}
        for router in self.routers:
            for path, node_id in router.watched_slots().items():
                self._by_path.setdefault(path, []).append((router, node_id))
        self._observer = Observer()
        self._stop = threading.Event()
        self._timers: dict[tuple[str, str, str], tuple[float, threading.Timer]] = {}
        self._timers_lock = threading.Lock()

    @property
    def folders(self) -> list[Path]:
        """The folders watched (each non-recursively)."""
        return sorted({path.parent for path in self._by_path})

    def on_path(self, path: Path) -> None:
        """Route the output slot at `path`, if it is one the sensor watches (called per file event)."""
        for router, node_id in self._by_path.get(path, ()):
            self.coalescer.submit(router.ledger, router.route_safely(node_id))
            self._arm(router, node_id, _HALF_WRITTEN, router.half_written_until(node_id))
        # Any event may be an input slot written for an external node (by this sensor or a run).
        for router in self.routers:
            self._arm_timeouts(router)

    def _arm_timeouts(self, router: ChainRouter) -> None:
        """(Re-)arm a timer for each external node of the chain waiting for its agent past a deadline."""
        for node_id in router.timed_external_nodes():
            self._arm(router, node_id, _TIMEOUT, router.overdue_at(node_id))

    def _arm(self, router: ChainRouter, node_id: str, clock: str, due: float | None) -> None:
        """(Re-)arm one clock of a node for `due` (epoch seconds), or disarm it when `due` is None."""
        if self._stop.is_set():
            return
        key = (router.chain_id, node_id, clock)
        with self._timers_lock:
            current = self._timers.get(key)
            if current is not None and (due is None or current[0] != due):
                current[1].cancel()
                del self._timers[key]
            if due is None or key in self._timers:
                return
            timer = threading.Timer(max(0.0, due - time.time()) + 0.05, self._fired, (router, node_id, clock))
            timer.daemon = True
            self._timers[key] = (due, timer)
            timer.start()

    def _fired(self, router: ChainRouter, node_id: str, clock: str) -> None:
        with self._timers_lock:
            self._timers.pop((router.chain_id, node_id, clock), None)
        try:
            if clock == _TIMEOUT:
                self.coalescer.submit(router.ledger, router.time_out(node_id))
            else:
                self.coalescer.submit(router.ledger, router.route_safely(node_id))
        except Exception:  # a timer thread must not die on one chain's slots
            logger.exception("the %s clock of %s in chain %s failed", clock, node_id, router.chain_id)

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
            self._arm_timeouts(router)
            for node_id in router.watched_slots().values():
                self._arm(router, node_id, _HALF_WRITTEN, router.half_written_until(node_id))
        logger.info("watching %d output slot(s) in %s", len(self._by_path), ", ".join(map(str, self.folders)))

    def stop(self) -> None:
        """Stop watching, let the event in hand finish, request every waiting run, and return."""
        self._stop.set()
        if self._observer.is_alive():
            self._observer.stop()
            self._observer.join()
        with self._timers_lock:
            for _, timer in self._timers.values():
                timer.cancel()
            self._timers.clear()
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
