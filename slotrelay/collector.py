"""The cyclic garbage collector turned off around work whose objects all live on.

A PSMR build or workspace load and the MCP server's imports make from a hundred thousand to millions of
small objects that outlive the work, so the collector, triggered by their number, rescans a growing heap
and frees nothing: without it, networkx builds in 8.4 s instead of 12.5 s, a one-file update takes 3.2 s
instead of 4.8 s and its workspace loads in half the time, with the same peak memory.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_off() -> Iterator[None]:
    """The cyclic collector off inside the block (or the decorated function), then as it was before."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
