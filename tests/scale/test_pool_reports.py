"""`PoolRunReports` (deployments/pool.py) on a stream of crash events, without a Prefect server: a crash
whose run cannot be read does not end the reports of the crashes after it, a crash the crash automation
marked twice is reported once, and reports that ended on an error stop quietly with `watch`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Self
from uuid import UUID, uuid4

import pytest

from deployments.pool import PoolRunReports
from tests.support.waiting import wait_until


def crashed(run: UUID, deployment: UUID, *, was: str = "RUNNING", message: str = "no heartbeat",
            run_count: int = 1) -> Any:
    """The event Prefect's server emits as a run of `deployment` in a state of type `was` ends Crashed
    (prefect/server/models/events.py's `flow_run_state_change_event`)."""
    from prefect.events.schemas.events import Event

    return Event(
        id=uuid4(), occurred=datetime.now(UTC), event="prefect.flow-run.Crashed",
        resource={"prefect.resource.id": f"prefect.flow-run.{run}", "prefect.resource.name": "a-run",
                  "prefect.run-count": str(run_count), "prefect.state-message": message},
        related=[{"prefect.resource.id": f"prefect.deployment.{deployment}",
                  "prefect.resource.role": "deployment", "prefect.resource.name": "chain"}],
        payload={"intended": {"from": was, "to": "CRASHED"},
                 "validated_state": {"type": "CRASHED", "message": message}},
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


def reported(monkeypatch: pytest.MonkeyPatch, deployment: UUID,
             describe: Callable[[PoolRunReports, Any], Awaitable[str]], *,
             until: Callable[[list[str]], bool], what: str) -> list[str]:
    """The reports of `deployment`'s crashes, each described by `describe`, once `until` holds of them
    (or the reports have ended)."""
    monkeypatch.setattr(PoolRunReports, "_describe", describe)
    reports: list[str] = []
    crashes = PoolRunReports([deployment], reports.append)
    crashes.start()
    try:
        wait_until(lambda: until(reports) or not crashes._thread.is_alive(), timeout=30,
                   what=f"{what}, or the reports' end")
    finally:
        crashes.stop()
    return reports


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

    reports = reported(monkeypatch, deployment, describe, until=lambda reports: len(reports) == 2,
                       what="two reports")
    assert len(reports) == 2, reports
    assert str(gone) in reports[0] and str(next_run) in reports[1], reports


def test_a_repeated_crash_is_reported_once_and_a_new_one_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # Prefect's automations act at least once: the crash automation may mark one silence Crashed twice,
    # the second time while Crashed or just after the reschedule (tests/scale/test_crash_automation.py).
    # `watch` prints that crash once; the run's next crash (its worker reports it, or it ran again and
    # went silent again) is printed too.
    deployment, run, after = uuid4(), uuid4(), uuid4()
    events = [crashed(run, deployment), crashed(run, deployment, was="CRASHED"),
              crashed(run, deployment, was="SCHEDULED"),
              crashed(run, deployment, was="PENDING", message="infrastructure exited with status 1"),
              crashed(run, deployment, run_count=2), crashed(after, deployment)]
    monkeypatch.setattr("prefect.events.clients.get_events_subscriber", lambda filter: Subscriber(events))

    async def describe(self: PoolRunReports, event: Any) -> str:
        labels = event.resource
        return f"run {labels.id} ({labels['prefect.run-count']}, {labels['prefect.state-message']}) crashed"

    # The run after it is reported once the repeats have been taken up.
    reports = reported(monkeypatch, deployment, describe,
                       until=lambda reports: any(str(after) in report for report in reports),
                       what="the report of the run after the repeats")
    assert [report.split(" ", 2)[2] for report in reports if str(run) in report] == [
        "(1, no heartbeat) crashed", "(1, infrastructure exited with status 1) crashed",
        "(2, no heartbeat) crashed"], reports


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
