"""The root of slotrelay's error tree, and the exit code each error means to the `slotrelay` command.

Every error the core raises derives from `SlotrelayError` and carries a stable `code` (the
chain's error types, MPP-E001..E006, WORKSPACE_NOT_FOUND, ...) and an `exit_code`. Each part keeps
its own subtree in its package:

    SlotrelayError                                      exit 1 unless a subclass says otherwise
     +-- BadInput              code BAD_INPUT           exit 2: an option, file or value the user can fix
     +-- EnvironmentMissing    code ENVIRONMENT_MISSING exit 3: something to install, start or set first
     +-- ChainError            slotrelay.chain.errors
     +-- SandboxError          slotrelay.sandbox.errors
     +-- PenError              slotrelay.pen.errors      (code MPP-E00n)
     +-- ToolError             what an MCP tool answers with: code, message, details
          +-- PsmrError        slotrelay.psmr.errors     (the twelve PSMR codes)
          +-- AgentToolError   slotrelay.chain.errors    (the engine's agent tools: five of them)

Only `slotrelay.cli` turns these into an exit and a message (`CODE: message` on stderr), in one
place, the way click handles its `ClickException` once. A command that has already printed how its
work ended raises `AlreadyReported`, which `slotrelay.cli` turns into the exit alone.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any


class ExitCode(IntEnum):
    """What the `slotrelay` command's exit status means, for every command."""

    OK = 0
    FAILED = 1
    """The work ran and failed: a failed flow run, a program that ended in error, a broken audit log."""
    BAD_INPUT = 2
    """An invalid chain, intent, request, option or file: fix the input and run again."""
    ENVIRONMENT_MISSING = 3
    """No Docker daemon, no Prefect server, a package not installed, no code model configured."""


class SlotrelayError(Exception):
    """Base class of every error slotrelay raises on purpose.

    Parameters:
        message: what went wrong, naming the field, file or value involved.
        code: a stable identifier a program can match on (default: the class's).
        exit_code: the `slotrelay` command's exit status for it (default: the class's).
    """

    code: str = "SLOTRELAY_ERROR"
    exit_code: ExitCode = ExitCode.FAILED

    def __init__(self, message: str, *, code: str | None = None, exit_code: ExitCode | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def format_message(self) -> str:
        """What the command line prints after `CODE: ` (more lines when there is more to say)."""
        return self.message

    def to_json(self) -> dict[str, Any]:
        """The `{"error": {"code", "message"}}` object a command run with `--json` prints instead."""
        return {"error": {"code": self.code, "message": self.message}}


class BadInput(SlotrelayError, ValueError):
    """An option, file or value the user gave that the command cannot use."""

    code = "BAD_INPUT"
    exit_code = ExitCode.BAD_INPUT


class EnvironmentMissing(SlotrelayError, RuntimeError):
    """Something the command needs is not installed, not running or not set; nothing ran."""

    code = "ENVIRONMENT_MISSING"
    exit_code = ExitCode.ENVIRONMENT_MISSING


class ToolError(SlotrelayError):
    """What an MCP tool answers with when it refuses: the `error` member of the result envelope
    (CONTRACTS.md#result-envelope), its `code` one of the twelve (CONTRACTS.md#psmr-error-codes).

    PSMR's errors and the engine's agent tools' derive from it, each part keeping its own classes, so
    that the MCP server answers every tool alike and neither part imports the other.

    Parameters:
        message: what went wrong and what to do instead.
        details: structured reasons the envelope carries beside the message (e.g. the failed checks of
            delta.validate), so a caller reads them without parsing text.
    """

    code = "TOOL_ERROR"

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details = details


class AlreadyReported(BaseException):
    """Control signal: the command printed how its work ended; `slotrelay` exits with `exit_code`.

    A failed flow run's summary, a program's error output, a broken audit log's lines or a PSMR error
    envelope is the report: `slotrelay.cli` prints nothing more. Not a `SlotrelayError`, since there is
    no message left to print, and a `BaseException`, like Prefect's Pause and Abort, so that no
    `except Exception` on the way out swallows it.

    Parameters:
        exit_code: the `slotrelay` command's exit status.
    """

    def __init__(self, exit_code: ExitCode) -> None:
        super().__init__(exit_code)
        self.exit_code = exit_code
