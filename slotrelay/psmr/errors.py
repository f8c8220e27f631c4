"""PSMR's errors: the twelve codes of the contract (CONTRACTS.md#psmr-error-codes), one class each.

    SlotrelayError
     +-- ToolError                       slotrelay.errors: what an MCP tool answers with
          +-- PsmrError
               +-- WorkspaceNotFound          WORKSPACE_NOT_FOUND
               +-- ObjectNotFound             OBJECT_NOT_FOUND
               +-- InvalidQuery               INVALID_QUERY
               +-- TypeMismatch               TYPE_MISMATCH
               +-- CapabilityDenied           CAPABILITY_DENIED
               +-- PolicyBlocked              POLICY_BLOCKED
               +-- OperatorUnavailable        OPERATOR_UNAVAILABLE
               +-- UnsupportedProjection      UNSUPPORTED_PROJECTION
               +-- UnresolvedRequiredInput    UNRESOLVED_REQUIRED_INPUT
               +-- ConflictRequiresReview     CONFLICT_REQUIRES_REVIEW
               +-- ExecutionFailed            EXECUTION_FAILED
               +-- ValidationFailed           VALIDATION_FAILED

Each carries its `exit_code`: 1 for EXECUTION_FAILED and VALIDATION_FAILED (the work ran and failed),
2 for the others (a request, workspace or object to fix). Every message says what to do instead;
`slotrelay.psmr.api.call` turns these into the `"error"` member of the result envelope and never lets
one escape.
"""

from __future__ import annotations

from slotrelay.errors import ExitCode, ToolError


class PsmrError(ToolError):
    """Base of every PSMR error; `code` is one of `ERROR_CODES` (message and `details` as `ToolError`'s)."""

    code = "PSMR_ERROR"


class WorkspaceNotFound(PsmrError):
    """No workspace with that id in the store."""

    code = "WORKSPACE_NOT_FOUND"
    exit_code = ExitCode.BAD_INPUT


class ObjectNotFound(PsmrError):
    """A semantic identity, evidence id or file the workspace does not hold."""

    code = "OBJECT_NOT_FOUND"
    exit_code = ExitCode.BAD_INPUT


class InvalidQuery(PsmrError):
    """The request misses a field, has an unknown one, or a continuation token does not fit."""

    code = "INVALID_QUERY"
    exit_code = ExitCode.BAD_INPUT


class TypeMismatch(PsmrError):
    """A field has the wrong JSON type, or the target is the wrong kind of node for the operation."""

    code = "TYPE_MISMATCH"
    exit_code = ExitCode.BAD_INPUT


class CapabilityDenied(PsmrError):
    """The operation needs a capability (source write, process execution) this runtime was not started
    with (`--allow-write ROOT`, `--allow-exec`), or writes outside the roots it was granted."""

    code = "CAPABILITY_DENIED"
    exit_code = ExitCode.BAD_INPUT


class PolicyBlocked(PsmrError):
    """The request would dump the whole graph or workspace (CONTRACTS.md#no-dumps)."""

    code = "POLICY_BLOCKED"
    exit_code = ExitCode.BAD_INPUT


class OperatorUnavailable(PsmrError):
    """No such operator in this runtime."""

    code = "OPERATOR_UNAVAILABLE"
    exit_code = ExitCode.BAD_INPUT


class UnsupportedProjection(PsmrError):
    """The requested output projection is not one this operator produces."""

    code = "UNSUPPORTED_PROJECTION"
    exit_code = ExitCode.BAD_INPUT


class UnresolvedRequiredInput(PsmrError):
    """The input exists only as an unresolved reference (an external or unknown), so it cannot be analysed."""

    code = "UNRESOLVED_REQUIRED_INPUT"
    exit_code = ExitCode.BAD_INPUT


class ConflictRequiresReview(PsmrError):
    """The target has an open conflict (e.g. two definitions) that the caller must acknowledge, or a
    file or the workspace changed since a delta was proposed or previewed."""

    code = "CONFLICT_REQUIRES_REVIEW"
    exit_code = ExitCode.BAD_INPUT


class ExecutionFailed(PsmrError):
    """A tool the operator runs (git, griffe, jedi) failed, or the operator hit an internal error."""

    code = "EXECUTION_FAILED"


class ValidationFailed(PsmrError):
    """A stored workspace failed its integrity check, or a delta failed delta.validate (the failed
    checks are in `details`)."""

    code = "VALIDATION_FAILED"


ERROR_CLASSES: tuple[type[PsmrError], ...] = (
    WorkspaceNotFound,
    ObjectNotFound,
    InvalidQuery,
    TypeMismatch,
    CapabilityDenied,
    PolicyBlocked,
    OperatorUnavailable,
    UnsupportedProjection,
    UnresolvedRequiredInput,
    ConflictRequiresReview,
    ExecutionFailed,
    ValidationFailed,
)
ERROR_CODES: tuple[str, ...] = tuple(cls.code for cls in ERROR_CLASSES)
