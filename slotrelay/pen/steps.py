"""How each of the pen's steps is run: a plain call by default, or through a runner the shell installs.

`slotrelay.pen.writer` writes the order of the steps once and hands each `Step` to `run_step`. The
core calls the step directly; the Prefect shell (`tasks/pen.py`) installs a runner that makes each
step a task run, so the `pen-write` flow and a chain's `pen` node show the same steps, and the core
stays free of Prefect. This module imports nothing of the pen, so installing a runner is cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slotrelay.pen.writer import PenRun


@dataclass(frozen=True)
class Step:
    """One step of `pen.write`: the name a person reads (a task run's name) and the call over the run."""

    name: str
    call: Callable[[PenRun], Any]


StepRunner = Callable[[Step, "PenRun"], Any]


def call_step(step: Step, run: PenRun) -> Any:
    """The core's runner: call the step."""
    return step.call(run)


_runner: StepRunner = call_step


def use_runner(runner: StepRunner) -> None:
    """Run every pen step of this process through `runner` (which must call `step.call(run)` once)."""
    global _runner
    _runner = runner


def run_step(step: Step, run: PenRun) -> Any:
    """Run one step through the installed runner and return what the step returned."""
    return _runner(step, run)
