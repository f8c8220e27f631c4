"""The `slotrelay` command's sub-commands, one module per part of the product.

Each module defines its commands on a `typer.Typer` and `slotrelay.cli` mounts them. A command
reports an error by raising a `SlotrelayError` (`slotrelay.errors`); `slotrelay.cli` prints it and
exits with its code. Heavy imports (Prefect, docker, the MCP SDK) happen inside the command
functions so that `slotrelay --help` stays fast.
"""

from __future__ import annotations
