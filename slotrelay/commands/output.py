"""What a command prints for a program: the one `--json` option, and the one way JSON is printed.

Every command with `--json` takes it as `AsJson`. With it, the command prints its result as JSON on
stdout, one document a line (`psmr build --watch` prints one a build), and an error the same way, as
`{"error": {"code": ..., "message": ...}}` (more keys where an error has more to say, e.g. the pen's
`pen_id` and `audit`), with the same exit code as without it. `slotrelay.cli` prints that error: the
option's callback tells it, through `JSON_ERRORS` in the command's context, that the caller reads JSON.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

JSON_ERRORS = "slotrelay.json_errors"
"""`typer.Context.meta` key: the command prints an error as its JSON object on stdout."""


def _json_errors(ctx: typer.Context, as_json: bool) -> bool:
    ctx.meta[JSON_ERRORS] = as_json
    return as_json


AsJson = Annotated[bool, typer.Option(
    "--json", help="print the result as JSON on stdout (an error too: {\"error\": {code, message}})",
    callback=_json_errors)]


def print_json(data: Any) -> None:
    """Print one JSON document on one line of stdout, flushed: a program may read it line by line.

    Non-ASCII text is escaped, so a string holding a lone surrogate (valid JSON) is printed on any stream.
    """
    sys.stdout.write(json.dumps(data, default=str) + "\n")
    sys.stdout.flush()
