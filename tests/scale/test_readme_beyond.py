"""The "Beyond one machine" commands of the docs (docs/beyond.md) are the ones the tests run (typer's habit:
every documented example runs in a test). Each template is formatted with the placeholder values the page
shows."""

from __future__ import annotations

from tests.support.beyond_page import PAGE, README_RUN, README_UP, REGISTER, REMOTE_BUILD, REMOTE_RUN


def test_every_command_of_the_section_is_run_by_a_test() -> None:
    shown = PAGE.read_text()
    for command in (
        README_UP.format(database="postgresql+asyncpg://slotrelay:PASSWORD@127.0.0.1:5432/prefect"),
        README_RUN.format(api="http://127.0.0.1:4200/api"),
        REMOTE_BUILD,
        REMOTE_RUN,
        REGISTER,
    ):
        assert f"\n{command}" in shown, command
