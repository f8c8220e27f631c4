"""Every `slotrelay` command the docs and README show is one today's CLI accepts: its sub-command exists,
each option it gives is one the command has, and it gives no argument too many.

The tests of each part run the commands themselves (typer's habit: every documented example runs in a
test; `tests/scale/test_readme_beyond.py` pins those of "Beyond one machine" to the ones its tests run).
This test catches the other drift: a page still showing an option or a command that was renamed or
removed. Options are parsed as the command's own parser parses them, without converting values (a
page's `CHAIN.json` need not exist).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main

from slotrelay.cli import app

REPO = Path(__file__).resolve().parents[1]
PAGES = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]
BLOCK = re.compile(r"^```(bash|console)\n(.*?)^```", re.MULTILINE | re.DOTALL)
# A synopsis writes `[--port N]` for an optional part, `A|B` for a choice and `...` for more of the same.
CHOICE = re.compile(r"^[\w-]+(\|[\w-]+)+$")


def logical_lines(block: str, console: bool) -> Iterator[str]:
    """The command lines of a code block, continued lines joined; of a console block only the `$ ` ones."""
    pending = ""
    for line in block.splitlines():
        if console and not pending:
            if not line.startswith("$ "):
                continue
            line = line[2:]
        pending = f"{pending}\n{line}" if pending else line
        if pending.endswith("\\"):
            pending = pending[:-1]
        elif pending.count("'") % 2 == 0:
            yield pending
            pending = ""


def shown_commands() -> list[tuple[str, list[str]]]:
    """Every `slotrelay` command of the pages' bash and console blocks: where, and the words after it."""
    commands = []
    for page in PAGES:
        for language, block in BLOCK.findall(page.read_text()):
            for line in logical_lines(block, console=language == "console"):
                words = shlex.split(line.replace("[", " ").replace("]", " "), comments=True)
                # Leading environment assignments (`VAR=value slotrelay ...`) are the shell's.
                while words and re.match(r"^[A-Z_]+=", words[0]):
                    words.pop(0)
                if not words or Path(words[0]).name != "slotrelay":
                    continue
                rest = words[1:]
                for stop in ("&&", "|", ";", "&"):
                    rest = rest[: rest.index(stop)] if stop in rest else rest
                rest = [word.split("|")[0] if CHOICE.match(word) else word for word in rest if word != "..."]
                commands.append((f"{page.relative_to(REPO)}: {line.strip()[:100]}", rest))
    return commands


def test_the_pages_show_commands_of_every_part() -> None:
    shown = {" ".join(words[:2]) for _, words in shown_commands()}
    for expected in ("validate examples/phase2/node_chain.json", "pen write", "psmr call", "sandbox run",
                     "mcp serve", "decide /tmp/pz/alerts/alert-20261130T083225.816Z-flaky.json"):
        assert expected in shown, sorted(shown)


@pytest.mark.parametrize(("where", "words"), shown_commands(), ids=lambda value: str(value)[:60])
def test_a_shown_command_is_one_the_cli_accepts(where: str, words: list[str]) -> None:
    command: Any = typer.main.get_command(app)
    path = ["slotrelay"]
    # Through click's lookup, not the `commands` dict: the root group loads each part's commands lazily.
    while words and hasattr(command, "get_command") and command.get_command(None, words[0]) is not None:
        path.append(words[0])
        command, words = command.get_command(None, words[0]), words[1:]
    assert not hasattr(command, "get_command"), f"{where}: `{' '.join(path)}` needs one of its commands"
    parser = command.make_parser(command.context_class(command, info_name=path[-1]))
    _, extra, _ = parser.parse_args(args=list(words))
    assert not extra, f"{where}: `{' '.join(path)}` takes no argument {extra}"
