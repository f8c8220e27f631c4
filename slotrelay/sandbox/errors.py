"""The sandbox's errors, a subtree of `slotrelay.errors.SlotrelayError`.

    SlotrelayError
     +-- SandboxError                  code SANDBOX_ERROR
          +-- SandboxUnavailable       code SANDBOX_UNAVAILABLE  no backend can run code here (pen: MPP-E002)
          |    +-- SandboxDaemonRefused                          the daemon answered a call with an error
          |         +-- SandboxNotFound                          ... it has no such container or image
          +-- SandboxRequestError      code SANDBOX_BAD_REQUEST  limits, language or backend name invalid
          +-- SandboxImageError        code SANDBOX_IMAGE        building or finding a sandbox image failed

`SandboxUnavailable` exits 3 (set up a backend), `SandboxRequestError` 2, the others 1.

A program that runs and fails, times out or breaks a limit is not an error: it is an
`ExecutionResult` with that status and its violations. These errors mean nothing ran.
The docker SDK's own errors become these in one place, `slotrelay.sandbox.docker_errors`.
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


class SandboxDaemonRefused(SandboxUnavailable):
    """The Docker daemon answered a call with an error status (a conflict, a missing object).

    It keeps its parent's code: to a program reading codes, the sandbox is unavailable all the same;
    the class is for the sandbox's own callers, which expect some refusals (killing a container that
    already ended).
    """


class SandboxNotFound(SandboxDaemonRefused):
    """The Docker daemon has no container or image of the name asked for (its 404)."""


class SandboxRequestError(SandboxError, ValueError):
    """The request is invalid: an unknown language or backend, or limits out of range."""

    code = "SANDBOX_BAD_REQUEST"
    exit_code = ExitCode.BAD_INPUT


class SandboxImageError(SandboxError, RuntimeError):
    """A sandbox image could not be built or is missing from the daemon."""

    code = "SANDBOX_IMAGE"
