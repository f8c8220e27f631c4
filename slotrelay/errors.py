"""The root of slotrelay's error tree.

Every error the core raises derives from `SlotrelayError` and carries a stable `code`
(the seeds name them: the chain's error types, MPP-E001..E006, WORKSPACE_NOT_FOUND, ...).
Each part keeps its own subtree in its package:

    SlotrelayError
     +-- ChainError            slotrelay.chain.errors
     +-- SandboxError          slotrelay.sandbox.errors
     +-- PenError              slotrelay.pen.errors      (code MPP-E00n)
     +-- PsmrError             slotrelay.psmr.errors     (the twelve PSMR codes)

Only `slotrelay.cli` turns these into exit codes and messages.
"""

from __future__ import annotations


class SlotrelayError(Exception):
    """Base class of every error slotrelay raises on purpose.

    Parameters:
        message: what went wrong, naming the field, file or value involved.
        code: a stable identifier a program can match on.
    """

    code: str = "SLOTRELAY_ERROR"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"
