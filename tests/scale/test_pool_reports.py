"""`PoolRunReports` (deployments/pool.py) on a stream of crash events, without a Prefect server: a crash
whose run cannot be read does not end the reports of the crashes after it, a run marked Crashed again while
Crashed is one crash, reported once, and reports that ended on an error stop quietly with `watch`."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from typing import Any, Self
from uuid import UUID, uuid4

import pytest

from deployments.pool import PoolRunReports
from tests.support.waiting import wait_until


def crashed(run: UUID, deployment: UUID, *, was: str = "RUNNING") -> Any:
    """The event Prefect's server emits as a run of `deployment` in a state of type `was` ends Crashed
    (prefect/server/models/events.py's `state_change_event`)."""
    from prefect.events.schemas.events import Event

    return Event(
        id=uuid4(), occurred=datetime.now(UTC), event="prefect.flow-run.Crashed",
        resource={"prefect.resource.id": f"prefect.flow-run.{run}", "prefect.resource.name": "a-run"},
        related=[{"prefect.resource.id": f"prefect.deployment.{deployment}",
                  "prefect.resource.role": "deployment", "prefect.resource.name": "chain"}],
        payload={"intended": {"from": was, "to": "CRASHED"},
                 "validated_state": {"type": "CRASHED", "message": "no heartbeat"}},
    )


class Subscriber:
    """In place of Prefect's events subscriber: the events given, then nothing until it is cancelled (or
    the error given, raised as it subscribes)."""

    def __init__(self, events: list[Any], error: Exception | None = None) -> None:
        self._events = events
        self._error = error

    async def __aenter__(self) -> Self:
        if self._error is not None:
            raise self._error
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def __aiter__(self) -> Any:
        return self._stream()

    async def _stream(self) -> Any:
        for event in self._events:
            yield event
        await asyncio.Event().wait()


def test_a_crash_whose_run_cannot_be_read_leaves_the_next_crashes_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from prefect.exceptions import ObjectNotFound

    deployment, gone, next_run = uuid4(), uuid4(), uuid4()
    monkeypatch.setattr("prefect.events.clients.get_events_subscriber",
                        lambda filter: Subscriber([crashed(gone, deployment), crashed(next_run, deployment)]))

    async def describe(self: PoolRunReports, event: Any) -> str:
        # The first run was deleted between its crash and this lookup.
        if event.resource.id == f"prefect.flow-run.{gone}":
            raise ObjectNotFound(http_exc=Exception("404"))
        return f"run {event.resource.id} crashed on the work pool"

    monkeypatch.setattr(PoolRunReports, "_describe", describe)
    reports: list[str] = []
    crashes = PoolRunReports([deployment], reports.append)
    crashes.start()
    try:
        listening = threading.Thread.is_alive
        wait_until(lambda: len(reports) == 2 or not listening(crashes._thread), timeout=30,
                   what="two reports, or the reports' end")
    finally:
        crashes.stop()
    assert len(reports) == 2, reports
    assert str(gone) in reports[0] and str(next_run) in reports[1], reports


def test_a_run_marked_crashed_again_while_crashed_is_reported_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Prefect's automations act at least once: the crash automation may mark one silence Crashed twice in
    # a row (tests/scale/test_crash_automation.py). `watch` prints one crash, not two.
    deployment, twice, after = uuid4(), uuid4(), uuid4()
    monkeypatch.setattr("prefect.events.clients.get_events_subscriber", lambda filter: Subscriber(
        [crashed(twice, deployment), crashed(twice, deployment, was="CRASHED"), crashed(after, deployment)]))

    async def describe(self: PoolRunReports, event: Any) -> str:
        return f"run {event.resource.id} crashed on the work pool"

    monkeypatch.setattr(PoolRunReports, "_describe", describe)
    reports: list[str] = []
    crashes = PoolRunReports([deployment], reports.append)
    crashes.start()
    try:
        # The run after it is reported once the repeat has been taken up.
        wait_until(lambda: any(str(after) in report for report in reports), timeout=30,
                   what="the report of the run after the repeat")
    finally:
        crashes.stop()
    assert [str(twice) in report for report in reports] == [True, False], reports


def test_reports_that_ended_on_an_error_stop_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    # The events' websocket could not be opened: the reports end (logged), `watch` serves on, and its stop
    # (Ctrl-C) stops them again.
    monkeypatch.setattr("prefect.events.clients.get_events_subscriber",
                        lambda filter: Subscriber([], ConnectionRefusedError("no events")))
    crashes = PoolRunReports([uuid4()], print)
    crashes.start()
    crashes._thread.join(timeout=30)
    assert not crashes._thread.is_alive()
    crashes.stop()
