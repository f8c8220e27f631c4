"""The `slotrelay` command tree is public surface: a change to it is a reviewed change of this list."""

from __future__ import annotations

import typer.main

from slotrelay.cli import app

COMMANDS = """
decide
graph
mcp serve
pen audit verify
pen decide
pen review
pen write
psmr build
psmr call
psmr callgraph
psmr list
psmr view
run
sandbox build
sandbox doctor
sandbox run
up
validate
watch
"""


def command_paths(command, prefix: str = "") -> list[str]:
    """Every leaf command under `command`, as space-separated paths."""
    if not hasattr(command, "list_commands"):
        return [prefix]
    paths = []
    for name in command.list_commands(None):
        paths += command_paths(command.get_command(None, name), f"{prefix} {name}".strip())
    return paths


def test_the_command_tree_is_the_documented_one() -> None:
    assert sorted(command_paths(typer.main.get_command(app))) == COMMANDS.split("\n")[1:-1]
