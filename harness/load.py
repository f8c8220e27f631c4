"""A busy machine on demand: processes spinning on the machine's cores, as other users' busy processes
would be, for the benchmarks that compare a run with and without them and the tests that must hold on a
loaded machine."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import psutil


@contextmanager
def cpu_hogs(count: int = 1) -> Iterator[list[psutil.Process]]:
    """`count` processes each spinning on one core, until the block ends: the first on the last core this
    process may use, the next on the one before, and round again past the first.

    Yields once each has spun for a tenth of a second, so what the block runs starts under load.
    """
    cores = sorted(os.sched_getaffinity(0), reverse=True)
    with ExitStack() as stack:
        hogs = [stack.enter_context(_spinning(cores[i % len(cores)])) for i in range(count)]
        yield hogs


@contextmanager
def _spinning(core: int) -> Iterator[psutil.Process]:
    spin = f"import os\nos.sched_setaffinity(0, {{{core}}})\nwhile True:\n    pass\n"
    process = subprocess.Popen([sys.executable, "-c", spin])
    try:
        hog = psutil.Process(process.pid)
        deadline = time.monotonic() + 30
        while hog.cpu_times().user < 0.1:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the CPU hog did not spin (exit code {process.poll()})")
            time.sleep(0.02)
        yield hog
    finally:
        process.kill()
        process.wait()


def tree_cpu(process: psutil.Process) -> float:
    """CPU seconds of `process` and its live descendants, each with what the children it has reaped spent
    (a `watch`'s flow-run processes, its warm processes, which are its fork server's children)."""
    total = 0.0
    for member in [process, *process.children(recursive=True)]:
        try:
            times = member.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total
