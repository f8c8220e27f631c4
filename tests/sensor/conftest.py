"""Fixtures of the sensor tests."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from pathlib import Path

import pytest

from harness.chains import RunRecorder
from slotrelay.chain.sensor import ChainRouter, SlotSensor
from tests.support.waiting import wait_until


class ObservedSensor(SlotSensor):
    """The sensor under test, counting the file events it has handled, by path.

    A test that proves an event changed nothing waits until the sensor has handled that event, instead
    of sleeping and hoping it has.
    """

    def __init__(self, routers: list[ChainRouter], start_run: RunRecorder, **options: float) -> None:
        super().__init__(routers, start_run, **options)
        self.handled: Counter[Path] = Counter()
        self._handled_lock = threading.Lock()

    def on_path(self, path: Path) -> None:
        super().on_path(path)
        with self._handled_lock:
            self.handled[path] += 1

    def settle(self, folder: Path, timeout: float = 20.0) -> None:
        """Return once every file event in `folder` so far is handled and the runs it asked for started.

        watchdog hands a folder's events over in the order they happened, on one thread: once the event
        of a file written now (not a slot) is handled, so is every event before it.
        """
        barrier = folder / f"barrier-{uuid.uuid4().hex}.txt"
        barrier.write_text("")
        wait_until(lambda: self.handled[barrier] > 0, timeout=timeout, what=f"the sensor to handle {barrier}",
                   interval=0.02)
        barrier.unlink()
        assert self.coalescer.wait_idle(5)


@pytest.fixture
def sensor_for():
    sensors: list[ObservedSensor] = []

    def start(chain_paths: list[Path], recorder: RunRecorder, **options) -> ObservedSensor:
        sensor = ObservedSensor([ChainRouter(p) for p in chain_paths], recorder, **options)
        sensor.start()
        sensors.append(sensor)
        return sensor

    yield start
    for sensor in sensors:
        sensor.stop()
