"""Fixtures of the sensor tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.chains import RunRecorder
from slotrelay.chain.sensor import ChainRouter, SlotSensor


@pytest.fixture
def sensor_for():
    sensors: list[SlotSensor] = []

    def start(chain_paths: list[Path], recorder: RunRecorder, **options) -> SlotSensor:
        sensor = SlotSensor([ChainRouter(p) for p in chain_paths], recorder, **options)
        sensor.start()
        sensors.append(sensor)
        return sensor

    yield start
    for sensor in sensors:
        sensor.stop()
