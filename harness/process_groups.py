"""Stopping a process the tests or the benches started in its own process group, with its children."""

from __future__ import annotations

import os
import signal
import subprocess


def stop_process_group(process: subprocess.Popen, first: signal.Signals, timeout: float) -> None:
    """Send `first` to the process group led by `process`; SIGKILL the group if it is not gone in `timeout`
    s."""
    os.killpg(process.pid, first)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
