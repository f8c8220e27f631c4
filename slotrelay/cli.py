"""The `slotrelay` command: mounts each part's sub-commands from `slotrelay.commands`.

Errors become exits here, once: a command raises a `SlotrelayError` (the core's own, or `BadInput` /
`EnvironmentMissing` for what the command itself checks), and `SlotrelayGroup` prints it as
`CODE: message` on stderr (its JSON object on stdout when the command was given `--json` with
`slotrelay.commands.json_errors`) and exits with its `exit_code` (`slotrelay.errors.ExitCode`):
0 success, 1 the work ran and failed, 2 bad input, 3 the environment is missing something.
A command whose work ran and failed after printing its result (a failed flow run or program, a
broken audit log) exits with `ExitCode.FAILED` itself: there is no error to report twice.
"""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from slotrelay.commands import JSON_ERRORS
from slotrelay.commands import chain as chain_commands
from slotrelay.commands import mcp as mcp_commands
from slotrelay.commands import pen as pen_commands
from slotrelay.commands import psmr as psmr_commands
from slotrelay.commands import sandbox as sandbox_commands
from slotrelay.commands import server as server_commands
from slotrelay.errors import SlotrelayError

err = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)


def show_error(error: SlotrelayError, *, as_json: bool) -> None:
    """Print an error for a person (stderr) or, under `--json`, for a program (stdout)."""
    if as_json:
        out.print_json(data=error.to_json())
        return
    # A message may quote a file holding lone surrogates (valid JSON escapes) that no stream can encode.
    text = error.format_message().encode("utf-8", "backslashreplace").decode("utf-8")
    err.print(f"[bold red]{escape(error.code)}[/]: {escape(text)}", highlight=False)


class SlotrelayGroup(TyperGroup):
    """The root command group: turns any `SlotrelayError` a command raises into its message and exit code."""

    # `ctx` is a context of typer's own copy of click, which typer does not export (typer._click): Any.
    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except SlotrelayError as error:
            show_error(error, as_json=bool(ctx.meta.get(JSON_ERRORS)))
            raise typer.Exit(int(error.exit_code)) from None


app = typer.Typer(
    name="slotrelay",
    cls=SlotrelayGroup,
    help="Run collaboration protocols between AI agents, tools and people, on Prefect 3.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
app.add_typer(mcp_commands.app, name="mcp")
app.add_typer(pen_commands.app, name="pen")
app.add_typer(psmr_commands.app, name="psmr")
app.add_typer(sandbox_commands.app, name="sandbox")
app.add_typer(chain_commands.app)
app.add_typer(server_commands.app)


@app.callback()
def main() -> None:
    """slotrelay: chain engine, magic pen and PSMR workspace."""


if __name__ == "__main__":
    app()
