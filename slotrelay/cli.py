"""The `slotrelay` command: mounts each part's sub-commands from `slotrelay.commands`.

Every command module maps its part's typed errors onto one convention of exit codes:
0 success, 1 the work ran and failed (a failed flow run, a failed sandbox program), 2 bad input
(an invalid chain, intent or request), 3 the environment is missing something (no Docker daemon,
no Prefect server, a package not installed).
"""

from __future__ import annotations

import typer

from slotrelay.commands import chain as chain_commands
from slotrelay.commands import mcp as mcp_commands
from slotrelay.commands import pen as pen_commands
from slotrelay.commands import psmr as psmr_commands
from slotrelay.commands import sandbox as sandbox_commands
from slotrelay.commands import server as server_commands

app = typer.Typer(
    name="slotrelay",
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
