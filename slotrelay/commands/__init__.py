"""The `slotrelay` command's sub-commands, one module per part of the product.

Each module defines its commands on a `typer.Typer` and `slotrelay.cli` mounts them. A command
reports an error by raising a `SlotrelayError` (`slotrelay.errors`); `slotrelay.cli` prints it and
exits with its code. Heavy imports (Prefect, docker, the MCP SDK) happen inside the command
functions so that `slotrelay --help` stays fast.
"""

from __future__ import annotations

import typer

JSON_ERRORS = "slotrelay.json_errors"
"""`typer.Context.meta` key: the command prints an error as its JSON object on stdout."""


def json_errors(ctx: typer.Context, as_json: bool) -> bool:
    """Callback of a `--json` option whose command prints its errors as JSON too (for a program on stdout)."""
    ctx.meta[JSON_ERRORS] = as_json
    return as_json
