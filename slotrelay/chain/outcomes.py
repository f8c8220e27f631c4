"""What a node run ended with: its state, and the outcome the node task hands the schedule.

`NodeState` names every state a node can be in during a run (the summary's `state` strings);
`NodeOutcome` is one finished node run, typed, as `tasks/node.py` returns it and
`ChainSchedule.settle` takes it. `Handling` is what the chain's error types make of a failure
(`slotrelay.chain.runner.decide_handling`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from slotrelay.chain.errors import NodeError

Handling = Literal["retry", "skip", "fail", "escalate", "arbitrate"]
# What an output slot's `status` may say. Here, not in slotrelay.chain.slots, so that what only needs
# the words (the MCP server's tool schemas) does not build the slots' pydantic models.
OUTPUT_STATUSES = ("completed", "failed", "skipped")


class NodeState(StrEnum):
    """Where a node stands in a run; the last four are final."""

    RUNNING = "Running"
    PAUSED = "Paused"
    COMPLETED = "Completed"
    SKIPPED = "Skipped"
    FAILED = "Failed"
    NOT_RUN = "NotRun"


FINAL = frozenset({NodeState.COMPLETED, NodeState.SKIPPED, NodeState.FAILED, NodeState.NOT_RUN})


@dataclass(frozen=True)
class NodeOutcome:
    """One finished node run.

    Attributes:
        node_id: the node.
        state: Completed, Skipped or Failed.
        attempts: how many attempts it took (0: settled from its slots without running).
        error_type: the failure's error type (a skip's too), else None.
        message: the failure's message, else None.
        handling: what the chain's error types made of the failure (skip, fail, escalate, arbitrate).
        output_slot: the output slot path when one was written (or an agent wrote it).
        document: the output slot document the routes are evaluated on.
        digest: the `content_hash` of the output slot's bytes (what the routes record as `from_output`).
    """

    node_id: str
    state: NodeState
    attempts: int
    error_type: str | None = None
    message: str | None = None
    handling: Handling | None = None
    output_slot: str | None = None
    document: dict[str, Any] | None = None
    digest: str | None = None

    @classmethod
    def failure(cls, node_id: str, state: NodeState, *, attempts: int, error: NodeError, handling: Handling,
                output_slot: str | None = None, document: dict[str, Any] | None = None,
                digest: str | None = None) -> NodeOutcome:
        """A node run that ended on an error (Failed, or Skipped by its error type)."""
        return cls(node_id, state, attempts, error.error_type, error.message, handling, output_slot, document,
                   digest)
