"""The helpers of `tests/support`: the waiting ones return what was waited for, and fail naming it; the
suite's order puts the files with the longest tests first."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from harness.waiting import wait_for
from tests.support.arbitration import wait_paused
from tests.support.ordering import heaviest_files_first
from tests.support.processes import wait_while_running
from tests.support.slotrelay_up import wait_for_up
from tests.support.waiting import wait_until, wait_until_async


def test_wait_until_returns_the_condition_once_it_holds() -> None:
    calls = iter([None, 0, "found"])
    assert wait_until(lambda: next(calls), timeout=60, what="a value", interval=0) == "found"


def test_wait_until_fails_naming_what_it_waited_for_and_what_it_saw() -> None:
    said = r"(?s)waiting for the slot to be routed:\nempty"
    with pytest.raises(pytest.fail.Exception, match=said):
        wait_until(lambda: False, timeout=0, what="the slot to be routed", details=lambda: "empty")


def test_the_benchmarks_wait_returns_what_held_and_raises_timeout_error_naming_what_it_waited_for() -> None:
    calls = iter([None, "ready"])
    assert wait_for(lambda: next(calls), 60, "the server", interval=0) == "ready"
    with pytest.raises(TimeoutError, match=r"(?s)waiting for the server:\nno answer"):
        wait_for(lambda: False, 0, "the server", details=lambda: "no answer")


def test_wait_until_async_waits_while_the_event_loop_goes_on_and_fails_as_wait_until_does() -> None:
    async def waits() -> None:
        ticks: list[int] = []

        async def tick() -> None:
            for n in range(3):
                ticks.append(n)
                await anyio.lowlevel.checkpoint()

        async with anyio.create_task_group() as group:
            group.start_soon(tick)
            # Only the loop's other task can make this hold.
            assert await wait_until_async(lambda: len(ticks) == 3, timeout=60, what="three ticks", interval=0)
        with pytest.raises(pytest.fail.Exception, match=r"(?s)waiting for the slot to be routed:\nempty"):
            await wait_until_async(lambda: False, timeout=0, what="the slot to be routed",
                                   details=lambda: "empty")

    anyio.run(waits)


def test_wait_while_running_fails_once_the_process_exits_with_its_log(tmp_path: Path) -> None:
    log = tmp_path / "log"
    with log.open("w") as sink:
        process = subprocess.Popen([sys.executable, "-c", "print('gave up')"], stdout=sink)
    # The timeout is far away: only the exit ends this wait.
    with pytest.raises(pytest.fail.Exception, match=r"(?s)exited with 0 before it answered:\ngave up"):
        wait_while_running(process, lambda: False, timeout=600, what="it answered", log=log)
    process.wait()


def test_wait_for_up_returns_once_its_condition_holds_and_fails_with_the_log_once_up_exits(
    tmp_path: Path,
) -> None:
    log = tmp_path / "up.log"
    with log.open("w") as sink:
        process = subprocess.Popen([sys.executable, "-c", "print('port taken'); raise SystemExit(3)"],
                                   stdout=sink, stderr=subprocess.STDOUT)
    wait_for_up(lambda: True, 600, "nothing", process, log)
    # The timeout is far away: only the exit ends this wait.
    with pytest.raises(pytest.fail.Exception, match=r"(?s)exited with 3 before the panel:\nport taken"):
        wait_for_up(lambda: False, 600, "the panel", process, log)
    process.wait()


def test_wait_paused_fails_once_the_run_exits_with_its_stderr_or_its_exit_code(tmp_path: Path) -> None:
    with subprocess.Popen([sys.executable, "-c", "import sys; sys.stderr.write('disk on fire')"],
                          stderr=subprocess.PIPE, text=True) as piped:
        piped.wait()
        # The timeout is far away: only the exit ends this wait.
        with pytest.raises(pytest.fail.Exception, match=r"(?s)the run exited with 0 before .*disk on fire"):
            wait_paused(tmp_path, piped, timeout=600)
    # `slotrelay up` writes to a log, not to a pipe: its exit code is what there is to say.
    with (tmp_path / "log").open("w") as sink:
        logged = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"], stdout=sink, stderr=sink)
    logged.wait()
    with pytest.raises(pytest.fail.Exception, match=r"the run exited with 3 before"):
        wait_paused(tmp_path, logged, timeout=600)


@dataclass
class Collected:
    """What the ordering reads of a collected test: its file and its markers."""

    path: Path
    name: str
    markers: list[str] = field(default_factory=list)

    def iter_markers(self) -> list[pytest.Mark]:
        return [getattr(pytest.mark, name).mark for name in self.markers]


def test_the_files_with_the_longest_tests_go_first_each_kept_whole_and_in_order() -> None:
    items = [
        Collected(Path("a.py"), "a1"),
        Collected(Path("b.py"), "b1"),
        Collected(Path("b.py"), "b2", ["prefect_server"]),
        Collected(Path("c.py"), "c1", ["docker"]),
        Collected(Path("d.py"), "d1", ["slow", "prefect_server"]),
        Collected(Path("e.py"), "e1", ["prefect_server"]),
        Collected(Path("a.py"), "a2", ["parametrize"]),
    ]
    heaviest_files_first(items)  # type: ignore[arg-type]
    assert [item.name for item in items] == ["d1", "b1", "b2", "e1", "c1", "a1", "a2"]
