"""One `pen.write` call as it goes (`PenRun`), and what `write` and `decide` hand back (`PenOutcome`).

The writer's steps fill a `PenRun` in; the step runner and the asker (`slotrelay.pen.steps`), the pen's
reports and the Prefect shell take it and the outcome as they are, without the writer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slotrelay.audit_log import AuditLog, sha256_text
from slotrelay.pen.errors import ExecutionTimedOut, PenError
from slotrelay.pen.models import EXTENSION_KEY, AuditRef, Execution, PenOutput, PenRequest
from slotrelay.pen.policy import Decision
from slotrelay.pen.terms import PenAction


@dataclass
class PenRun:
    """Everything one `pen.write` call has produced so far."""

    root: Path
    request: PenRequest
    pen_id: str
    intent_hash: str
    started_at: str
    code: str | None = None
    execution: Execution | None = None
    sandbox: dict[str, Any] = field(default_factory=dict)
    suggestion: PenAction | None = None
    suggestion_source: str | None = None
    decision: Decision | None = None
    timings: dict[str, float] = field(default_factory=dict)
    # Where the code model and the sandbox policy came from (`config_report`), for the output.
    config: dict[str, Any] | None = None
    # What runs the pen (a chain's node), told to a person asked to decide, and how long they have.
    where: str | None = None
    decision_timeout_s: int | None = None

    @property
    def persona_id(self) -> str:
        """The persona holding the pen."""
        return self.request.context.persona_id

    @property
    def log(self) -> AuditLog:
        """The audit log under the run's root."""
        return AuditLog(self.root)

    @property
    def code_hash(self) -> str | None:
        """sha256 of the code, once there is code."""
        return sha256_text(self.code) if self.code is not None else None

    def output(self, syslog_id: str) -> PenOutput:
        """The `pen.write` output object (once the run has completed)."""
        if self.code is None or self.execution is None or self.suggestion is None:
            raise PenError(f"pen {self.pen_id} has not completed: no output yet")
        return PenOutput(
            pen_id=self.pen_id,
            code=self.code,
            lang=self.request.options.sandbox.lang,
            execution=self.execution,
            suggestion=self.suggestion,
            audit=AuditRef(syslog_id=syslog_id, intent_hash=self.intent_hash, code_hash=self.code_hash),
        )


@dataclass
class PenOutcome:
    """What `write` and `decide` hand back: the output and what became of the pen."""

    output: PenOutput
    state: str
    final_action: PenAction | None
    decided_by: str
    location: str | None
    timings: dict[str, float] = field(default_factory=dict)
    config: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The seed's output object, with what slotrelay adds under its one extension key.

        `x-slotrelay`: `decision` (final action, state, who decided, where the files are), `config`
        (where the code model and the sandbox policy came from; null for a later `pen decide`) and
        `error` (the MPP code a completed run recorded, MPP-E004 for a timeout; else null).
        """
        return {
            **self.output.model_dump(mode="json"),
            EXTENSION_KEY: {
                "decision": {
                    "final_action": self.final_action,
                    "state": self.state,
                    "decided_by": self.decided_by,
                    "location": self.location,
                },
                "config": self.config,
                "error": execution_error(self.output.execution),
            },
        }


def execution_error(execution: Execution) -> dict[str, str] | None:
    """The MPP error a completed run recorded: MPP-E004 when the program was killed at its deadline."""
    if execution.status != "timeout":
        return None
    return {
        "code": ExecutionTimedOut.code,
        "message": f"the program ran past timeout_ms and was killed after {execution.duration_ms} ms",
    }
