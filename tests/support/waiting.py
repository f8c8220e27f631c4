"""Waiting on a condition, never on a fixed sleep: a test polls what it waits for until it holds or a
deadline passes, then fails saying what it waited for and what it saw.

The deadline only bounds a wait that went wrong; it is never what a test proves, so it is generous
(a loaded machine, CI's two cores) and a passing wait ends as soon as its condition holds. The polling
loop is the one the benchmarks use too (`harness.waiting`); a test's wait fails with `pytest.fail`
where a benchmark's raises `TimeoutError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio
import pytest

from harness.waiting import Polling, wait_for

T = TypeVar("T")

# How often to ask the Prefect API while waiting on it: each question costs about 35 ms of CPU between the
# test and the server (most open a new client; measured), against well under 1 ms to read a slot file,
# which `wait_until`'s default interval suits.
API_POLL_SECONDS = 0.5


def wait_until(
    condition: Callable[[], T],
    *,
    timeout: float,
    what: str,
    interval: float = 0.05,
    details: Callable[[], str] | None = None,
) -> T:
    """Call `condition` until it returns something truthy, and return that.

    Parameters:
        condition: what is waited for; it returns a falsy value while it does not hold.
        timeout: seconds after which the test fails.
        what: the condition in words, for the failure ("the control chain's slot routed").
        interval: seconds between two calls.
        details: called once on failure, its text added to the message (a log, the last state seen).
    """
    return wait_for(condition, timeout, what, interval=interval, details=details, timed_out=pytest.fail)


async def wait_until_async(
    condition: Callable[[], T],
    *,
    timeout: float,
    what: str,
    interval: float = 0.05,
    details: Callable[[], str] | None = None,
) -> T:
    """`wait_until` inside an event loop, which goes on running while the test waits (same parameters)."""
    polling = Polling(condition, timeout=timeout, what=what, details=details, timed_out=pytest.fail)
    for _ in polling:
        await anyio.sleep(interval)
    return polling.value
