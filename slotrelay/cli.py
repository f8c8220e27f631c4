"""The `slotrelay` command: mounts each part's sub-commands from `slotrelay.commands`.

Errors become exits here, once: a command raises a `SlotrelayError` (the core's own, or `BadInput` /
`EnvironmentMissing` for what the command itself checks), and `SlotrelayGroup` prints it as
`CODE: message` on stderr (its JSON object on stdout when the command was given `--json`:
`slotrelay.commands.output`) and exits with its `exit_code` (`slotrelay.errors.ExitCode`):
0 success, 1 the work ran and failed, 2 bad input, 3 the environment is missing something.
A command whose work ran and failed after printing its result (a failed flow run or program, a
broken audit log, a PSMR error envelope) raises `AlreadyReported` with its exit code: there is no
error to report twice. Only this module exits.

Each part's commands are imported when one of them runs (or when help lists them all), not at
start: `slotrelay mcp serve`, which an MCP host spawns for every session, loads neither the chain
engine's, the pen's nor the servers' command modules and what they import.

Help shows a flag (`--json`, `--help`, either side of a `--flag/--no-flag` pair) without a value: each
command is passed through `show_flags_as_flags` as it is mounted, the root's own flags as help asks
for them.
"""

from __future__ import annotations

import importlib
from typing import Any

import typer
import typer.main
from typer.core import TyperGroup

from slotrelay.commands.output import JSON_ERRORS, print_json
from slotrelay.errors import AlreadyReported, SlotrelayError

# `slotrelay NAME ...`: the module whose Typer app is that group of commands.
COMMAND_GROUPS = {
    "mcp": "slotrelay.commands.mcp",
    "pen": "slotrelay.commands.pen",
    "psmr": "slotrelay.commands.psmr",
    "sandbox": "slotrelay.commands.sandbox",
}
# The modules whose commands sit at the top level (`slotrelay validate`, `slotrelay up`), in help's order.
TOP_LEVEL_COMMANDS = ("slotrelay.commands.chain", "slotrelay.commands.server")


def show_error(error: SlotrelayError, *, as_json: bool) -> None:
    """Print an error for a person (stderr) or, under `--json`, for a program (stdout)."""
    if as_json:
        print_json(error.to_json())
        return
    # rich only when there is an error to show: `slotrelay mcp serve` answers without it (docs/mcp.md).
    from rich.console import Console
    from rich.markup import escape

    # A message may quote a file holding lone surrogates (valid JSON escapes) that no stream can encode.
    text = error.format_message().encode("utf-8", "backslashreplace").decode("utf-8")
    err = Console(stderr=True, soft_wrap=True)
    err.print(f"[bold red]{escape(error.code)}[/]: {escape(text)}", highlight=False)


def show_flags_as_flags(command: Any, parent: Any = None) -> None:
    """Show every flag of `command` and of the commands under it, `--help` included, with no metavar.

    Click makes `--help` when first asked for it, from the context's help option names, and keeps it
    on the command: it is asked for here through a context made as click would make it (the parent's
    names, then the command's own `context_settings`).
    """
    context = typer.Context(command, parent=parent, **command.context_settings)
    for param in [*command.params, command.get_help_option(context)]:
        _without_metavar_if_flag(param)
    for sub in getattr(command, "commands", {}).values():
        show_flags_as_flags(sub, context)


def _without_metavar_if_flag(param: Any) -> None:
    # Typer's help panel prints each option's type after its name (`--port <int>`), flags too
    # (`--json <bool>`), though a flag takes no value; a metavar, when set, is printed instead.
    if param is not None and (getattr(param, "is_flag", False) or getattr(param, "count", False)):
        param.metavar = ""


class SlotrelayGroup(TyperGroup):
    """The root command group: loads each part's commands when they are asked for (click's lazy
    subcommands), turns any `SlotrelayError` a command raises into its message and exit code, and an
    `AlreadyReported` into its exit code alone."""

    def get_params(self, ctx: Any) -> list[Any]:
        # Typer adds the root's completion options after making the group, so they are marked here.
        params: list[Any] = super().get_params(ctx)
        for param in params:
            _without_metavar_if_flag(param)
        return params

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
            self._mount(name, group)

    def _load_top_level(self) -> None:
        for module in TOP_LEVEL_COMMANDS:
            for name, command in typer.main.get_group(importlib.import_module(module).app).commands.items():
                if name not in self.commands:
                    self._mount(name, command)

    def _mount(self, name: str, command: Any) -> None:
        show_flags_as_flags(command, typer.Context(self, **self.context_settings))
        self.add_command(command, name)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except SlotrelayError as error:
            show_error(error, as_json=bool(ctx.meta.get(JSON_ERRORS)))
            raise typer.Exit(int(error.exit_code)) from None
        except AlreadyReported as reported:
            raise typer.Exit(int(reported.exit_code)) from None


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
