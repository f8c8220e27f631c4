"""slotrelay: a local-first, event-driven engine for collaboration protocols, on Prefect 3.

The package is the functional core. It never imports Prefect or the MCP SDK: the
top-level `flows/`, `tasks/`, `blocks/`, `deployments/`, `psmr_mcp/` and `psmr_view/` packages wrap it.
The one exception is the CLI (`slotrelay.cli`, `slotrelay.commands`), the top layer, which starts that
shell. import-linter's contracts in pyproject.toml check both, and the layers in between.
"""

__version__ = "0.1.0"
