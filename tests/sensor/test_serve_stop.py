"""A stop asked for while `watch` is still starting (its warm pool, its runner) stops it once it has started.

Prefect's `Runner.astop` refuses a runner that has not started: a SIGINT in the moment between the
signal handler and the runner's start was lost, and `watch` served on until a second SIGINT. A SIGINT
while the warm pool started, before the handler, cancelled that start half way.
"""

from __future__ import annotations

import asyncio
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


# A flow module whose first import, in the serving process (not in the fork server that imports it again
# for the warm processes), says so in a file and then blocks on a FIFO until the test writes to it: the
# warm pool's start, held open.
HELD_FLOW = '''
import os

from prefect import flow

try:
    os.close(os.open(os.environ["HELD_IMPORTING"], os.O_CREAT | os.O_EXCL))
except FileExistsError:
    pass
else:
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


def test_a_sigint_while_the_warm_pool_starts_stops_watch(prefect_server, tmp_path) -> None:
    # The window after `watching` is printed: the pool imports the chain flow (seconds on a loaded
    # machine) before the runner starts. A SIGINT there went to asyncio's handler, which cancelled the
    # main task inside the pool's start: this process ended with the cancellation's traceback, exit 1.
    (tmp_path / "held_flow.py").write_text(HELD_FLOW)
    fifo, importing, log = tmp_path / "held.fifo", tmp_path / "importing", tmp_path / "serve.log"
    os.mkfifo(fifo)
    env = {**os.environ, "PREFECT_API_URL": prefect_server, "HELD_FIFO": str(fifo),
           "HELD_IMPORTING": str(importing),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    with log.open("w") as out:
        serving = subprocess.Popen([sys.executable, "-c", SERVE], env=env, stdout=out,
                                   stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: importing.exists() or serving.poll() is not None, timeout=240,
                   what="the warm pool to import its flow", details=log.read_text)
        assert serving.poll() is None, log.read_text()
        serving.send_signal(signal.SIGINT)
        with open(fifo, "w") as release:
            release.write("go")
        try:
            # A deadline, not a measurement: a process that lost the signal serves on forever.
            code = serving.wait(timeout=240)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the SIGINT was lost: still serving 240 s after it\n{log.read_text()}")
    finally:
        if serving.poll() is None:
            serving.kill()
            serving.wait()
    assert code == 0, log.read_text()
    assert "stopped" in log.read_text(), log.read_text()
