"""How much resolving a tree may cost: CPU seconds, memory, resolver steps.

A build's resolution (`slotrelay.psmr.analysis.link.Linker`) takes one step per value it computes. A
`BuildBudget` counts them and, every `CHECK_EVERY` steps and before each cycle of values is settled
(where a step's own cost can hide), looks at the process's CPU time since the build started and its
resident memory. Once a limit is passed every further step raises `BudgetExceeded`:
what was computed stays, what was not is not guessed. The linker stops flowing arguments, and every
call site whose resolution still needed a step becomes the unknown `budget_exceeded`; the build
writes its workspace as usual, with a warning naming the limit. The defaults are far above what
real packages take (bench/psmr_build_cost.py: every package of its list within 5 CPU-s per 10k lines
and 1 GB), so a build meets them only on a tree the resolver handles badly: the budget bounds the
damage, it is never the normal path. A steps limit is deterministic, for tests.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field

DEFAULT_CPU_S = 1800.0
DEFAULT_MEMORY_BYTES = 12 * 1024**3
# Steps between two looks at the clock and the memory (a look costs about what a step does; a step
# can be slow on a tree the resolver handles badly).
CHECK_EVERY = 64
# The reason of the unknowns a stopped resolution leaves.
REASON = "budget_exceeded"


class BudgetExceeded(Exception):
    """A limit of the build's budget was passed (`limit`: cpu_s, memory_bytes or steps)."""

    def __init__(self, limit: str) -> None:
        super().__init__(limit)
        self.limit = limit


def resident_bytes() -> int:
    """The process's resident memory now (its peak where /proc is missing)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@dataclass
class BuildBudget:
    """Limits of one build's resolution; None lifts one. `step` is called once per computed value."""

    cpu_s: float | None = DEFAULT_CPU_S
    memory_bytes: int | None = DEFAULT_MEMORY_BYTES
    steps: int | None = None
    used: int = field(default=0, init=False)
    # The limit passed, once one is.
    exceeded: str | None = field(default=None, init=False)
    _cpu_start: float = field(default_factory=time.process_time, init=False)

    def start(self) -> None:
        """Count from now (a build starts its budget when it starts resolving)."""
        self._cpu_start = time.process_time()
        self.used = 0
        self.exceeded = None

    def step(self) -> None:
        """One step of resolution; raises BudgetExceeded once a limit is passed (and at every step after)."""
        if self.exceeded is not None:
            raise BudgetExceeded(self.exceeded)
        self.used += 1
        if self.steps is not None and self.used > self.steps:
            self._exceed("steps")
        if self.used % CHECK_EVERY == 0:
            self.look()

    def look(self) -> None:
        """Raise BudgetExceeded if the CPU time or the memory is past its limit (or one was before)."""
        if self.exceeded is not None:
            raise BudgetExceeded(self.exceeded)
        if self.cpu_s is not None and time.process_time() - self._cpu_start > self.cpu_s:
            self._exceed("cpu_s")
        if self.memory_bytes is not None and resident_bytes() > self.memory_bytes:
            self._exceed("memory_bytes")

    def _exceed(self, limit: str) -> None:
        self.exceeded = limit
        raise BudgetExceeded(limit)

    def describe(self) -> str:
        """The limit passed, in words (for the build's warning)."""
        value = {
            "cpu_s": f"{self.cpu_s} CPU seconds",
            "memory_bytes": f"{self.memory_bytes} bytes of memory",
            "steps": f"{self.steps} resolver steps",
        }
        return value.get(self.exceeded or "", "nothing")
