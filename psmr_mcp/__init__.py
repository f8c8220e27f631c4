"""PSMR over MCP: the psmr_* tool surface of a PSMR workspace, on stdio and streamable HTTP.

The core (`slotrelay.psmr`) knows nothing of MCP; this package adapts it with the official `mcp`
SDK. `catalog` is the one table of tools, `server` answers `tools/list` and `tools/call`,
`workspaces` holds what the server serves and may analyse, `transports` runs it. Start it with
`slotrelay mcp serve`.
"""

from psmr_mcp.server import build_server
from psmr_mcp.workspaces import WorkspaceRegistry

__all__ = ["WorkspaceRegistry", "build_server"]
