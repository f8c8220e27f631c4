"""A process that must not outlive the process that started it (Linux's parent-death signal).

A flow run on a work pool is a child process of its worker. When the worker dies (kill -9, its
machine's power), the child lives on by default; Prefect then marks the run Crashed once its
heartbeats stop and runs it again on another worker, and the first process, still running, would go on
writing slots beside the second. `die_with_parent` asks the kernel to kill this process the moment its
parent dies: no window in which both write. It also checks the parent is still the one expected, since
a parent dead before the request would otherwise go unnoticed.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

import psutil

PR_SET_PDEATHSIG = 1


class LifetimeUnavailable(OSError):
    """The kernel cannot tie this process to its parent (not Linux, or prctl refused)."""


def die_with_parent(*, parent_command: str) -> None:
    """Be killed (SIGKILL) when the parent process dies; die now if it is already gone.

    The parent that started this process ran the same Python interpreter (Prefect starts a run with its
    own `sys.executable`) or says `parent_command` on its command line (`worker`); one that died before
    this call has handed this process to another (init, a subreaper), which does neither.

    Raises:
        LifetimeUnavailable: not on Linux, or the kernel refused the request.
    """
    if not sys.platform.startswith("linux"):
        raise LifetimeUnavailable("a process can be tied to its parent's life on Linux only")
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise LifetimeUnavailable(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) was refused")
    try:
        spawner = psutil.Process(parent)
        ours = spawner.exe() == psutil.Process().exe() or parent_command in " ".join(spawner.cmdline())
    except psutil.Error:
        ours = False
    if os.getppid() != parent or not ours:
        os.kill(os.getpid(), signal.SIGKILL)
