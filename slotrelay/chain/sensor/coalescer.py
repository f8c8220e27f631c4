"""Coalescing routed targets into few runs: one run of a chain per short window.

A flow run costs about a second however little it does, so targets routed close together (a burst
of output slots) start ONE run of their chain beginning at all of them, not one run each. A target
routed when its chain had no run requested for a window starts its run at once (a lone event pays
no wait); later ones wait for the window, counted from the first of them, so none waits longer.

Key contracts:
- Before a run is requested the ledger gets a `run` line naming its routes and its batch id, and
  after the request succeeds a `started` line; the batch id is passed to the run request as its
  idempotency key. A request repeated after a crash therefore cannot start a second run.
- A failed request is retried a few times; if it still fails the ledger keeps the `run` line
  without `started`, and the next start of the sensor repeats it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from slotrelay.chain.ledger import PendingRun, RoutedEntry, RoutingLedger

logger = logging.getLogger(__name__)

StartRun = Callable[[str, list[str], str], str]
"""`start_run(chain_id, start_nodes, idempotency_key) -> flow_run_id`: starts one run of the chain."""


@dataclass
class _Waiting:
    since: float
    ledger: RoutingLedger
    entries: list[RoutedEntry] = field(default_factory=list)


class RunCoalescer:
    """Collects routed targets per chain and starts one run per chain per window, on its own thread.

    Parameters:
        start_run: the action that starts a run (injected: Prefect's in production, a recorder in tests).
        window_seconds: how long the first waiting target waits for others to join its run.
        attempts: how many times a failing run request is tried before it is left to the next start.
    """

    def __init__(self, start_run: StartRun, *, window_seconds: float = 0.1, attempts: int = 3) -> None:
        self._start_run = start_run
        self._window = window_seconds
        self._attempts = attempts
        self._waiting: dict[str, _Waiting] = {}
        self._last_request: dict[str, float] = {}
        self._repeats: list[tuple[RoutingLedger, PendingRun]] = []
        self._cond = threading.Condition()
        self._closing = False
        self._busy = False
        self._thread = threading.Thread(target=self._loop, name="slotrelay-run-coalescer", daemon=True)

    def start(self) -> None:
        """Start the thread that requests runs."""
        self._thread.start()

    def submit(self, ledger: RoutingLedger, entries: list[RoutedEntry]) -> None:
        """Queue routed targets; they join the current window of their chain.

        Parameters:
            ledger: the ledger the routes were recorded in (their run is recorded there too).
            entries: routes whose targets must run.
        """
        if not entries:
            return
        with self._cond:
            for entry in entries:
                waiting = self._waiting.setdefault(entry.chain_id, _Waiting(time.monotonic(), ledger))
                waiting.entries.append(entry)
            self._cond.notify_all()

    def repeat(self, ledger: RoutingLedger, run: PendingRun) -> None:
        """Queue a run the ledger says was requested but not confirmed; it is requested again as it was."""
        with self._cond:
            self._repeats.append((ledger, run))
            self._cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Block until nothing waits and no request is in flight; returns False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._waiting or self._repeats or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, timeout: float = 30.0) -> None:
        """Request every run still waiting now (no window), then stop the thread."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _loop(self) -> None:
        while True:
            with self._cond:
                batch = self._take_due()
                while batch is None:
                    if self._closing and not self._waiting and not self._repeats:
                        return
                    self._cond.wait(self._time_to_next())
                    batch = self._take_due()
                self._busy = True
            try:
                for ledger, run in batch:
                    self._request(ledger, run)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _due_at(self, chain_id: str, waiting: _Waiting) -> float:
        last = self._last_request.get(chain_id)
        if last is None or waiting.since - last >= self._window:
            return waiting.since
        return waiting.since + self._window

    def _time_to_next(self) -> float | None:
        if not self._waiting:
            return None
        first = min(self._due_at(chain_id, w) for chain_id, w in self._waiting.items())
        return max(0.0, first - time.monotonic())

    def _take_due(self) -> list[tuple[RoutingLedger, PendingRun]] | None:
        """Runs to request now: repeats, and every chain whose window has passed (all when closing)."""
        now = time.monotonic()
        due: list[tuple[RoutingLedger, PendingRun]] = list(self._repeats)
        self._repeats.clear()
        for chain_id in list(self._waiting):
            waiting = self._waiting[chain_id]
            if self._closing or now >= self._due_at(chain_id, waiting):
                del self._waiting[chain_id]
                self._last_request[chain_id] = now
                # The same route can arrive twice (an event racing the start-up reconcile): run it once.
                fresh = {e.key: e for e in waiting.entries if not waiting.ledger.is_batched(e.key)}
                if fresh:
                    nodes = [e.to_node for e in fresh.values()]
                    due.append((waiting.ledger, waiting.ledger.record_run(chain_id, nodes, list(fresh))))
        return due or None

    def _request(self, ledger: RoutingLedger, run: PendingRun) -> None:
        for attempt in range(1, self._attempts + 1):
            try:
                flow_run_id = self._start_run(run.chain_id, run.start_nodes, run.batch_id)
            except Exception as exc:  # noqa: BLE001 - foreign code (an API client): the sensor must live on
                logger.warning(
                    "starting a run of chain %s at %s failed (attempt %d of %d): %s",
                    run.chain_id, run.start_nodes, attempt, self._attempts, exc,
                )
                time.sleep(0.2 * attempt)
                continue
            ledger.record_started(run, str(flow_run_id))
            logger.info("chain %s: run %s started at %s", run.chain_id, flow_run_id, run.start_nodes)
            return
        logger.error(
            "chain %s: run %s not started; the next start of the sensor requests it again",
            run.chain_id, run.batch_id,
        )
