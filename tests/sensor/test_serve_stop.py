"""A stop asked for while `watch` is still starting (its warm pool, its runner) stops it once it has started.

Prefect's `Runner.astop` refuses a runner that has not started: a SIGINT in the moment between the
signal handler and the runner's start was lost, and `watch` served on until a second SIGINT. A SIGINT
while the warm pool started, before the handler, cancelled that start half way.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys

import pytest

from tests.support.waiting import wait_until

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


# A flow module whose import number HELD_AT (1: the serving process's; 2: the fork server's, which imports it
# again for the warm processes) says so in a file and then blocks on a FIFO until the test writes to it:
# the warm pool's start, held open at that import.
HELD_FLOW = '''
import os

from prefect import flow

number = 1
while True:
    try:
        os.close(os.open(f"{os.environ['HELD_IMPORTING']}-{number}", os.O_CREAT | os.O_EXCL))
        break
    except FileExistsError:
        number += 1
if number == int(os.environ["HELD_AT"]):
    with open(os.environ["HELD_FIFO"]) as held:
        held.read()


@flow
def held():
    pass
'''

SERVE = '''
from deployments.serve import serve_until_stopped
from deployments.warm import WarmPool

serve_until_stopped([], poll_seconds=1.0, warm=WarmPool(1, entrypoint="held_flow:held"))
print("stopped", flush=True)
'''


def stopped_while_held(prefect_server: str, tmp_path, held_at: int, to_the_group: bool) -> str:
    """Serve with a warm pool whose flow import number `held_at` is held, send SIGINT (to the serving
    process, or to its whole process group as a terminal's Ctrl-C and `up` do) inside it, release it, and
    return the log of a stop that must end with exit code 0."""
    (tmp_path / "held_flow.py").write_text(HELD_FLOW)
    fifo, importing, log = tmp_path / "held.fifo", tmp_path / "importing", tmp_path / "serve.log"
    os.mkfifo(fifo)
    env = {**os.environ, "PREFECT_API_URL": prefect_server, "HELD_FIFO": str(fifo),
           "HELD_IMPORTING": str(importing), "HELD_AT": str(held_at),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    held = tmp_path / f"importing-{held_at}"
    with log.open("w") as out:
        serving = subprocess.Popen([sys.executable, "-c", SERVE], env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: held.exists() or serving.poll() is not None, timeout=240,
                   what="the held import of the warm pool's flow", details=log.read_text)
        assert serving.poll() is None, log.read_text()
        if to_the_group:
            os.killpg(serving.pid, signal.SIGINT)
        else:
            serving.send_signal(signal.SIGINT)

        def released() -> bool:
            """Write to the FIFO once its importer has opened it; the importer may also be gone (a fork
            server the group's SIGINT ended), and with it the serving process's wait for it."""
            try:
                release = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: its importer has not opened it (yet)
                return serving.poll() is not None
            with contextlib.suppress(BrokenPipeError):
                os.write(release, b"go")
            os.close(release)
            return True

        wait_until(released, timeout=240, what="the held import to be released", details=log.read_text)
        try:
            # A deadline, not a measurement: a process that lost the signal serves on forever.
            code = serving.wait(timeout=240)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the SIGINT was lost: still serving 240 s after it\n{log.read_text()}")
    finally:
        if serving.poll() is None:
            os.killpg(serving.pid, signal.SIGKILL)
            serving.wait()
    assert code == 0, log.read_text()
    assert "stopped" in log.read_text(), log.read_text()
    return log.read_text()


def test_a_sigint_while_the_warm_pool_starts_stops_watch(prefect_server, tmp_path) -> None:
    # The window after `watching` is printed: the pool imports the chain flow (seconds on a loaded
    # machine) before the runner starts. A SIGINT there went to asyncio's handler, which cancelled the
    # main task inside the pool's start: this process ended with the cancellation's traceback, exit 1.
    stopped_while_held(prefect_server, tmp_path, held_at=1, to_the_group=False)


def test_a_ctrl_c_while_the_fork_server_imports_stops_watch_cleanly(prefect_server, tmp_path) -> None:
    # The fork server shares `watch`'s process group, which a terminal's Ctrl-C (and `up`'s stop) signals
    # as a whole. A SIGINT during its import of Prefect ended it with its own KeyboardInterrupt traceback
    # on the console, and the pool's start then failed with EOFError, which ended `watch` with exit code 1
    # (a fresh clone's test_up_on_postgresql...). `watch` must stop as asked, and quietly.
    log = stopped_while_held(prefect_server, tmp_path, held_at=2, to_the_group=True)
    assert "Traceback" not in log, log
