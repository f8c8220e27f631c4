"""The `slotrelay` command: mounts each part's sub-commands from `slotrelay.commands`.

Errors become exits here, once: a command raises a `SlotrelayError` (the core's own, or `BadInput` /
`EnvironmentMissing` for what the command itself checks), and `SlotrelayGroup` prints it as
`CODE: message` on stderr (its JSON object on stdout when the command was given `--json` with
`slotrelay.commands.json_errors`) and exits with its `exit_code` (`slotrelay.errors.ExitCode`):
0 success, 1 the work ran and failed, 2 bad input, 3 the environment is missing something.
A command whose work ran and failed after printing its result (a failed flow run or program, a
broken audit log) exits with `ExitCode.FAILED` itself: there is no error to report twice.

Each part's commands are imported when one of them runs (or when help lists them all), not at
start: `slotrelay mcp serve`, which an MCP host spawns for every session, loads neither the chain
engine's, the pen's nor the servers' command modules and what they import.
"""

from __future__ import annotations

import importlib
from typing import Any

import typer
import typer.main
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from slotrelay.commands import JSON_ERRORS
from slotrelay.errors import SlotrelayError

# `slotrelay NAME ...`: the module whose Typer app is that group of commands.
COMMAND_GROUPS = {
    "mcp": "slotrelay.commands.mcp",
    "pen": "slotrelay.commands.pen",
    "psmr": "slotrelay.commands.psmr",
    "sandbox": "slotrelay.commands.sandbox",
}
# The modules whose commands sit at the top level (`slotrelay validate`, `slotrelay up`), in help's order.
TOP_LEVEL_COMMANDS = ("slotrelay.commands.chain", "slotrelay.commands.server")

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
    """The root command group: loads each part's commands when they are asked for (click's lazy
    subcommands), and turns any `SlotrelayError` a command raises into its message and exit code."""

    # `ctx` is a context of typer's own copy of click, which typer does not export (typer._click): Any.
    def list_commands(self, ctx: Any) -> list[str]:
        for name in COMMAND_GROUPS:
            self._load_group(name)
        self._load_top_level()
        return [*COMMAND_GROUPS, *(name for name in self.commands if name not in COMMAND_GROUPS)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in COMMAND_GROUPS:
            self._load_group(cmd_name)
        elif cmd_name not in self.commands:
            self._load_top_level()
        return super().get_command(ctx, cmd_name)

    def _load_group(self, name: str) -> None:
        if name not in self.commands:
            group = typer.main.get_group(importlib.import_module(COMMAND_GROUPS[name]).app)
            group.name = name
            self.add_command(group, name)

    def _load_top_level(self) -> None:
        for module in TOP_LEVEL_COMMANDS:
            for name, command in typer.main.get_group(importlib.import_module(module).app).commands.items():
                self.commands.setdefault(name, command)

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


@app.callback()
def main() -> None:
    """slotrelay: chain engine, magic pen and PSMR workspace."""


if __name__ == "__main__":
    app()
