"""Waiting on a process a test started: a condition that holds while the process runs, with its log
in the failure when it exits first or the wait times out."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from tests.support.waiting import wait_until

T = TypeVar("T")


def log_text(log: Path | None) -> str:
    """What the process wrote to its log so far ("" without one)."""
    if log is None or not log.exists():
        return ""
    return log.read_text(errors="replace")


def wait_while_running(
    process: subprocess.Popen,
    condition: Callable[[], T],
    *,
    timeout: float,
    what: str,
    log: Path | None = None,
    interval: float = 0.05,
) -> T:
    """Call `condition` until it returns something truthy, and return that; fail, showing `log`, once
    the process has exited without it holding or `timeout` s pass."""

    def holds_or_running() -> T:
        value = condition()
        if not value and process.poll() is not None:
            pytest.fail(f"the process exited with {process.returncode} before {what}:\n{log_text(log)}")
        return value

    return wait_until(holds_or_running, timeout=timeout, what=what, interval=interval,
                      details=lambda: log_text(log))
