"""The `slotrelay` command's sub-commands, one module per part of the product.

Each module defines its commands on a `typer.Typer` and `slotrelay.cli` mounts them.
Heavy imports (Prefect, docker, the MCP SDK) happen inside the command functions so that
`slotrelay --help` stays fast.
"""
