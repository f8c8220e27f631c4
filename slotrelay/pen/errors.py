"""The pen's errors: one class per MPP error code of the seed, plus contract misuse.

    SlotrelayError
     +-- PenError                       code MPP-E00n or PEN_*
          +-- IntentRejected            MPP-E001  empty, too little information, sensitive content
          +-- SandboxStartFailed        MPP-E002  no sandbox backend could start the code
          +-- CodeGenerationFailed      MPP-E003  model unreachable, 5xx after retries, timeout, refusal,
          |                                       no code
          +-- ExecutionTimedOut         MPP-E004  the sandbox killed the program at its deadline (recorded in
          |                                       the audit; the answer is the output, status `timeout`)
          +-- PermissionViolation       MPP-E005  network, subprocess or file access the options forbid
          +-- ShareRejected             MPP-E006  the registry review rejected a shared tool
          +-- InvalidPenRequest         PEN_INVALID_REQUEST   a request, pen_id or option that is malformed
          +-- IllegalTransition         PEN_ILLEGAL_TRANSITION a state change the pen's states do not allow
          +-- PenNotFound               PEN_NOT_FOUND         no pen with that id under the root
          +-- ModelNotConfigured        PEN_MODEL_NOT_CONFIGURED  no code-model endpoint given
          +-- DecisionTimedOut          PEN_DECISION_TIMEOUT  nobody answered a run's pause for a person
          +-- PenRunFailed              PEN_RUN_FAILED        an error no other code names (bug, full disk)

Each carries its `exit_code`: 2 for MPP-E001 and PEN_INVALID_REQUEST, PEN_ILLEGAL_TRANSITION and
PEN_NOT_FOUND (input to fix), 3 for MPP-E002 and PEN_MODEL_NOT_CONFIGURED (something to set up), 1 for
the rest (the work ran and failed).

A `PenError` raised by `pen.write` carries the audit reference of the call (`audit`), because the
seed keeps an audit record for every call, failed or not, and the `pen_id` once one was assigned (an
error before that, such as an invalid request, has none).
"""

from __future__ import annotations

import json
from typing import Any

from slotrelay.errors import ExitCode, SlotrelayError


class PenError(SlotrelayError):
    """Base of the pen's errors.

    Parameters:
        message: what went wrong, naming the field or value involved.
        details: structured findings (what the screen found, the server's error body, ...).
    """

    code = "PEN_ERROR"

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details = details or {}
        self.audit: dict[str, Any] | None = None
        self.pen_id: str | None = None

    def format_message(self) -> str:
        """The message, then the pen, one line per detail and the call's audit reference."""
        lines = [self.message]
        if self.pen_id:
            lines.append(f"  pen_id: {self.pen_id}")
        for key, value in self.details.items():
            lines.append(f"  {key}: {json.dumps(value, ensure_ascii=False, default=str)}")
        if self.audit:
            lines.append(f"  audit: {self.audit}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The `{"error": {...}, "pen_id": ..., "audit": {...}}` object `pen --json` prints on failure.

        `pen_id` is the pen the error is about, null when none was assigned yet.
        """
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            error["details"] = self.details
        return {"error": error, "pen_id": self.pen_id, "audit": self.audit}


class IntentRejected(PenError):
    """MPP-E001: the intent is empty, says too little, or carries sensitive content."""

    code = "MPP-E001"
    exit_code = ExitCode.BAD_INPUT


class SandboxStartFailed(PenError):
    """MPP-E002: no sandbox backend could start the code; nothing ran unsandboxed."""

    code = "MPP-E002"
    exit_code = ExitCode.ENVIRONMENT_MISSING


class CodeGenerationFailed(PenError):
    """MPP-E003: the code model could not be reached, failed, refused, or replied without code."""

    code = "MPP-E003"


class ExecutionTimedOut(PenError):
    """MPP-E004: the program ran past `timeout_ms` and was killed."""

    code = "MPP-E004"


class PermissionViolation(PenError):
    """MPP-E005: the code uses a resource the options forbid (found statically or by the sandbox)."""

    code = "MPP-E005"


class ShareRejected(PenError):
    """MPP-E006: the registry review rejected the shared tool."""

    code = "MPP-E006"


class InvalidPenRequest(PenError, ValueError):
    """A request, option, pen_id or policy file that does not follow the contract."""

    code = "PEN_INVALID_REQUEST"
    exit_code = ExitCode.BAD_INPUT


class IllegalTransition(PenError):
    """A state change the pen's state machine (CONTRACTS.md#pen-states) does not allow."""

    code = "PEN_ILLEGAL_TRANSITION"
    exit_code = ExitCode.BAD_INPUT


class PenNotFound(PenError, LookupError):
    """No pen with that id has a record under the root."""

    code = "PEN_NOT_FOUND"
    exit_code = ExitCode.BAD_INPUT


class ModelNotConfigured(PenError):
    """No code-model endpoint was given (Block, arguments, environment or `.env`)."""

    code = "PEN_MODEL_NOT_CONFIGURED"
    exit_code = ExitCode.ENVIRONMENT_MISSING


class DecisionTimedOut(PenError):
    """A run paused for a person's decision on a pen and nobody answered in time.

    The pen stays `completed` and staged: `slotrelay pen decide` can still decide it.
    """

    code = "PEN_DECISION_TIMEOUT"


class PenRunFailed(PenError):
    """An error none of the codes above names broke a run; the pen is cleaned up and its call recorded.

    The original exception is the `__cause__`.
    """

    code = "PEN_RUN_FAILED"
