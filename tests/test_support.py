"""The waiting helpers of `tests/support`: they return what was waited for, and fail naming it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import wait_while_running
from tests.support.waiting import wait_until


def test_wait_until_returns_the_condition_once_it_holds() -> None:
    calls = iter([None, 0, "found"])
    assert wait_until(lambda: next(calls), timeout=60, what="a value", interval=0) == "found"


def test_wait_until_fails_naming_what_it_waited_for_and_what_it_saw() -> None:
    said = r"(?s)waiting for the slot to be routed:\nempty"
    with pytest.raises(pytest.fail.Exception, match=said):
        wait_until(lambda: False, timeout=0, what="the slot to be routed", details=lambda: "empty")


def test_wait_while_running_fails_once_the_process_exits_with_its_log(tmp_path: Path) -> None:
    log = tmp_path / "log"
    with log.open("w") as sink:
        process = subprocess.Popen([sys.executable, "-c", "print('gave up')"], stdout=sink)
    # The timeout is far away: only the exit ends this wait.
    with pytest.raises(pytest.fail.Exception, match=r"(?s)exited with 0 before it answered:\ngave up"):
        wait_while_running(process, lambda: False, timeout=600, what="it answered", log=log)
    process.wait()
