"""A stop asked for while `watch`'s runner is still starting stops it once it has started.

Prefect's `Runner.astop` refuses a runner that has not started: a SIGINT in the moment between the
signal handler and the runner's start was lost, and `watch` served on until a second SIGINT.
"""

from __future__ import annotations

import asyncio

import pytest

pytestmark = pytest.mark.prefect_server


def test_a_stop_asked_before_the_runner_has_started_stops_it(prefect_server) -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from deployments.serve import _runner, _stop_and_reschedule

    async def scenario() -> None:
        started = asyncio.Event()
        runner = _runner(1.0, None, started)
        stop = asyncio.create_task(_stop_and_reschedule(runner, [], None, started))
        # A deadline, not a measurement: a runner the stop missed serves on forever.
        await asyncio.wait_for(runner.start(), timeout=300)
        await stop
        assert runner.stopping and not runner.started

    with temporary_settings({PREFECT_API_URL: prefect_server}):
        asyncio.run(scenario())
