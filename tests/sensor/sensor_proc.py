"""A sensor in its own process for the kill -9 and SIGINT tests: `python sensor_proc.py RUNS_FILE CHAIN...`.

It runs the real sensor (watchdog, ledger, coalescer) with a `RunRecorder` writing to RUNS_FILE as its
start-run action, and logs "watching" on stderr once it is ready.
"""

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from harness.chains import RunRecorder
from slotrelay.chain.sensor import ChainRouter, SlotSensor

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    runs_file, *chains = sys.argv[1:]
    sensor = SlotSensor([ChainRouter(Path(c)) for c in chains], RunRecorder(Path(runs_file)))
    sensor.run_until_stopped()
