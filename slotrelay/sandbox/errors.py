"""The sandbox's errors, a subtree of `slotrelay.errors.SlotrelayError`.

    SlotrelayError
     +-- SandboxError                  code SANDBOX_ERROR
          +-- SandboxUnavailable       code SANDBOX_UNAVAILABLE   no backend can run code here (pen: MPP-E002)
          +-- SandboxRequestError      code SANDBOX_BAD_REQUEST   limits, language or backend name invalid
          +-- SandboxImageError        code SANDBOX_IMAGE         building or finding a sandbox image failed

`SandboxUnavailable` exits 3 (set up a backend), `SandboxRequestError` 2, the others 1.

A program that runs and fails, times out or breaks a limit is not an error: it is an
`ExecutionResult` with that status and its violations. These errors mean nothing ran.
"""

from __future__ import annotations

from slotrelay.errors import ExitCode, SlotrelayError


class SandboxError(SlotrelayError):
    """Base of every sandbox error."""

    code = "SANDBOX_ERROR"


class SandboxUnavailable(SandboxError, RuntimeError):
    """No sandbox backend can run code on this machine (or the one asked for cannot).

    The message names each backend tried and why it cannot run; code never runs unsandboxed.
    """

    code = "SANDBOX_UNAVAILABLE"
    exit_code = ExitCode.ENVIRONMENT_MISSING


class SandboxRequestError(SandboxError, ValueError):
    """The request is invalid: an unknown language or backend, or limits out of range."""

    code = "SANDBOX_BAD_REQUEST"
    exit_code = ExitCode.BAD_INPUT


class SandboxImageError(SandboxError, RuntimeError):
    """A sandbox image could not be built or is missing from the daemon."""

    code = "SANDBOX_IMAGE"
