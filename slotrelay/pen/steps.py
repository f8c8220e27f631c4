"""How each of the pen's steps is run, and who is asked when a persona's policy wants a person.

`slotrelay.pen.writer` writes the order of the steps once and hands each `Step` to `run_step`. The
core calls the step directly; the Prefect shell (`tasks/pen.py`) installs a runner that makes each
step a task run, so the `pen-write` flow and a chain's `pen` node show the same steps, and the core
stays free of Prefect. In the same way the shell installs an asker (`use_asker`): under Prefect it
pauses the flow run with a decision form, in the `pen-write` flow and in a chain's `pen` node alike;
the core's own asks nobody, and the pen waits, completed, for `slotrelay pen decide`. This module
imports nothing of the pen but its terms, so installing either is cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slotrelay.pen.terms import PenAction

if TYPE_CHECKING:
    from slotrelay.pen.run import PenOutcome, PenRun


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


@dataclass(frozen=True)
class PersonAnswer:
    """A person's final action on a pen, who they are (`decided_by`) and why (`comment`)."""

    action: PenAction
    decided_by: str
    comment: str | None = None


# Given the run and its pending outcome, a person's answer; None when there is nobody to ask here.
PersonAsker = Callable[["PenRun", "PenOutcome"], PersonAnswer | None]


def ask_nobody(run: PenRun, pending: PenOutcome) -> PersonAnswer | None:
    """The core's asker: nobody, so the pen waits for `slotrelay pen decide`."""
    return None


_asker: PersonAsker = ask_nobody


def use_asker(asker: PersonAsker) -> None:
    """Ask a person through `asker` in this process whenever a persona's policy says a person decides."""
    global _asker
    _asker = asker


def ask_a_person(run: PenRun, pending: PenOutcome) -> PersonAnswer | None:
    """A person's answer through the installed asker (None: the pen waits for `slotrelay pen decide`).

    Raises:
        DecisionTimedOut: the asker paused for a person and nobody answered in time.
    """
    return _asker(run, pending)
