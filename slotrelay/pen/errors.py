"""The pen's errors: one class per MPP error code of the seed, plus contract misuse.

    SlotrelayError
     +-- PenError                       code MPP-E00n or PEN_*
          +-- IntentRejected            MPP-E001  empty, too little information, sensitive content
          +-- SandboxStartFailed        MPP-E002  no sandbox backend could start the code
          +-- CodeGenerationFailed      MPP-E003  model unreachable, 5xx after retries, timeout, refusal, no
          code +-- ExecutionTimedOut         MPP-E004  the sandbox killed the program at its deadline
          +-- PermissionViolation       MPP-E005  network, subprocess or file access the options forbid
          +-- ShareRejected             MPP-E006  the registry review rejected a shared tool
          +-- InvalidPenRequest         PEN_INVALID_REQUEST   a request, pen_id or option that is malformed
          +-- IllegalTransition         PEN_ILLEGAL_TRANSITION a state change section 5 does not allow
          +-- PenNotFound               PEN_NOT_FOUND         no pen with that id under the root
          +-- ModelNotConfigured        PEN_MODEL_NOT_CONFIGURED  no code-model endpoint given
          +-- PenRunFailed              PEN_RUN_FAILED        an error no other code names (bug, full disk)

A `PenError` raised by `pen.write` carries the audit reference of the call (`audit`), because the
seed keeps an audit record for every call, failed or not.
"""

from __future__ import annotations

from typing import Any

from slotrelay.errors import SlotrelayError


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

    def to_json(self) -> dict[str, Any]:
        """The `{"error": {...}, "audit": {...}}` object `pen write --json` prints on failure."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            error["details"] = self.details
        return {"error": error, "audit": self.audit}


class IntentRejected(PenError):
    """MPP-E001: the intent is empty, says too little, or carries sensitive content."""

    code = "MPP-E001"


class SandboxStartFailed(PenError):
    """MPP-E002: no sandbox backend could start the code; nothing ran unsandboxed."""

    code = "MPP-E002"


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


class IllegalTransition(PenError):
    """A state change that section 5's state machine does not allow."""

    code = "PEN_ILLEGAL_TRANSITION"


class PenNotFound(PenError, LookupError):
    """No pen with that id has a record under the root."""

    code = "PEN_NOT_FOUND"


class ModelNotConfigured(PenError):
    """No code-model endpoint was given (Block, arguments, environment or `.env`)."""

    code = "PEN_MODEL_NOT_CONFIGURED"


class PenRunFailed(PenError):
    """An error none of the codes above names broke a run; the pen is cleaned up and its call recorded.

    The original exception is the `__cause__`.
    """

    code = "PEN_RUN_FAILED"
