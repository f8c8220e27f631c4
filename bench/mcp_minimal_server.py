"""The MCP SDK's minimal stdio server, the reference for `slotrelay mcp serve`'s cold start.

One tool answering from memory, served the way the SDK's quickstart does it (`MCPServer(...).run()`):
what any Python MCP server pays before its first answer, with nothing of slotrelay loaded.
"""

from mcp.server.mcpserver import MCPServer

server = MCPServer("minimal")


@server.tool()
def search(text: str) -> str:
    """Echo the query: the answer needs nothing but the SDK."""
    return text


if __name__ == "__main__":
    server.run()
