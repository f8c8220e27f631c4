"""slotrelay: a local-first, event-driven engine for collaboration protocols, on Prefect 3.

The package is the functional core. It never imports Prefect or the MCP SDK: the
top-level `flows/`, `tasks/`, `blocks/`, `deployments/` and `psmr_mcp/` packages wrap it. The one
exception is the CLI's `slotrelay.commands`, which starts that shell (import-linter's contract in
pyproject.toml allows it there and nowhere else).
"""

__version__ = "0.1.0"
