"""The README's "Beyond one machine" commands are the ones the tests run (typer's habit: every documented
example runs in a test). Each template is formatted with the placeholder values the README shows."""

from __future__ import annotations

from pathlib import Path

from tests.pen.test_remote_sandbox import REMOTE_BUILD, REMOTE_RUN
from tests.scale.test_blocks import REGISTER
from tests.scale.test_postgres_server import README_RUN, README_UP

README = Path(__file__).resolve().parents[2] / "README.md"


def section() -> str:
    text = README.read_text()
    start = text.index("## Beyond one machine")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def test_every_command_of_the_section_is_run_by_a_test() -> None:
    shown = section()
    for command in (
        README_UP.format(database="postgresql+asyncpg://slotrelay:PASSWORD@127.0.0.1:5432/prefect"),
        README_RUN.format(api="http://127.0.0.1:4200/api"),
        REMOTE_BUILD,
        REMOTE_RUN,
        REGISTER,
    ):
        assert f"\n{command}" in shown, command
