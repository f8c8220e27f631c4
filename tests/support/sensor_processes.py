"""The sensor tests' processes: a sensor core in its own process (tests/sensor/sensor_proc.py), a
`slotrelay watch` on a Prefect server, and an agent writing its slot from another process
(tests/sensor/agent_proc.py), each started and, for the long-lived ones, stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.chain_specs import ROOT
from tests.support.waiting import wait_until

SENSOR_TESTS = ROOT / "tests" / "sensor"


def start_sensor_process(runs_file: Path, chains: list[Path]) -> subprocess.Popen:
    """A sensor core on `chains` in its own process, recording the runs it requests in `runs_file`;
    returned once it watches."""
    log = runs_file.with_name(f"sensor-{time.monotonic_ns()}.log")
    with log.open("w") as handle:
        process = subprocess.Popen(
            [sys.executable, str(SENSOR_TESTS / "sensor_proc.py"), str(runs_file), *map(str, chains)],
            stderr=handle,
        )
    wait_until(lambda: "watching" in log.read_text() or process.poll() is not None, timeout=30,
               what="the sensor process", interval=0.02)
    assert process.poll() is None, log.read_text()
    return process


def agent(folder: Path, node_id: str, data: dict) -> None:
    """The agent of `node_id` writes its completed output slot, from a process of its own."""
    document = {"node_id": node_id, "status": "completed", "data": data, "capabilities_used": ["Write"]}
    slot = folder / "slots" / f"{node_id}_output.json"
    subprocess.run([sys.executable, str(SENSOR_TESTS / "agent_proc.py"), str(slot), json.dumps(document)],
                   check=True, timeout=60)


def start_watch(chains: list[Path], log: Path, api: str, *options: str) -> subprocess.Popen:
    """`slotrelay watch OPTIONS CHAINS` on the server at `api`, writing to `log`; returned once it watches."""
    with log.open("w") as handle:
        watch = subprocess.Popen(
            [sys.executable, "-m", "slotrelay.cli", "watch", *options, *map(str, chains)],
            cwd=ROOT, env={**os.environ, "PREFECT_API_URL": api, "COLUMNS": "200"},
            stdout=handle, stderr=subprocess.STDOUT)
    wait_until(lambda: "watching" in log.read_text() or watch.poll() is not None, timeout=90,
               what="watch to start", interval=0.1)
    assert watch.poll() is None, log.read_text()
    return watch


def stop_watch(watch: subprocess.Popen, log: Path) -> None:
    """SIGINT to `watch`, which exits 0."""
    watch.send_signal(signal.SIGINT)
    try:
        code = watch.wait(timeout=90)
    except subprocess.TimeoutExpired:
        # Killed so that one watch that missed its stop does not outlive this test into the next ones.
        watch.kill()
        watch.wait()
        raise AssertionError(f"watch did not stop on SIGINT:\n{log.read_text()}") from None
    assert code == 0, log.read_text()
