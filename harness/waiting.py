"""Waiting on a condition, never on a fixed sleep: the one polling loop of the tests and the benchmarks.

`Polling` calls a condition until it holds or a deadline passes; a caller sleeps between two calls as its
context allows (`wait_for` with `time.sleep`; the tests' `wait_until_async` inside an event loop), and
says how a wait that timed out ends: a benchmark raises `TimeoutError`, a test fails
(tests/support/waiting.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Generic, NoReturn, TypeVar

T = TypeVar("T")


def raise_timeout(message: str) -> NoReturn:
    """What a wait that timed out does unless told otherwise: raise `TimeoutError(message)`."""
    raise TimeoutError(message)


class Polling(Generic[T]):
    """A condition called until it returns something truthy (then `value`), or until `timeout` seconds
    have passed (then `timed_out` is called with a message naming `what`, and `details()`'s text if
    given). Iterating over it calls the condition; each item is a pause the caller sleeps before the next
    call."""

    value: T

    def __init__(
        self,
        condition: Callable[[], T],
        *,
        timeout: float,
        what: str,
        details: Callable[[], str] | None = None,
        timed_out: Callable[[str], NoReturn] = raise_timeout,
    ) -> None:
        self.condition = condition
        self.timeout = timeout
        self.what = what
        self.details = details
        self.timed_out = timed_out

    def __iter__(self) -> Iterator[None]:
        deadline = time.monotonic() + self.timeout
        while not (value := self.condition()):
            if time.monotonic() > deadline:
                said = f"timed out after {self.timeout} s waiting for {self.what}"
                self.timed_out(f"{said}:\n{self.details()}" if self.details is not None else said)
            yield
        self.value = value


def wait_for(
    condition: Callable[[], T],
    timeout: float,
    what: str,
    *,
    interval: float = 0.2,
    details: Callable[[], str] | None = None,
    timed_out: Callable[[str], NoReturn] = raise_timeout,
) -> T:
    """Call `condition` until it returns something truthy, and return that.

    Parameters:
        condition: what is waited for; it returns a falsy value while it does not hold.
        timeout: seconds after which the wait gives up.
        what: the condition in words, for the message ("the worker to start").
        interval: seconds between two calls.
        details: called once on a timeout, its text added to the message (a log, the last state seen).
        timed_out: called with the message on a timeout; it must raise.

    Raises:
        TimeoutError: past `timeout` seconds, unless `timed_out` raises something else.
    """
    polling = Polling(condition, timeout=timeout, what=what, details=details, timed_out=timed_out)
    for _ in polling:
        time.sleep(interval)
    return polling.value
