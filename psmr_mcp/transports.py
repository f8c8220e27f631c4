"""The two ways the PSMR MCP server talks: stdio (an MCP host starts it) and streamable HTTP.

HTTP binds to loopback only: the server has no authentication, so reaching it from another machine
would hand the workspace to anyone on the network. Host and Origin headers are checked against
the exact bound address (DNS-rebinding protection), so a web page that resolves its own name to
127.0.0.1 is refused with 421/403 before any MCP message is read.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings

from slotrelay.psmr.errors import CapabilityDenied, InvalidQuery

MCP_PATH = "/mcp"
_LOOPBACK_NAMES = ("localhost",)


def parse_http_address(address: str) -> tuple[str, int]:
    """Split `HOST:PORT` (IPv6 as `[::1]:PORT`) and check it is a loopback address.

    Parameters:
        address: the value of `--http`, e.g. `127.0.0.1:8765`.

    Returns:
        The host (without brackets) and the port.

    Raises:
        InvalidQuery: the value is not `HOST:PORT` with a port from 1 to 65535.
        CapabilityDenied: the host is not a loopback address.
    """
    host, sep, port_text = address.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise InvalidQuery(
            f"--http {address!r}: expected HOST:PORT with a port from 1 to 65535, e.g. 127.0.0.1:8765"
        )
    host = host.strip("[]")
    if host not in _LOOPBACK_NAMES:
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise CapabilityDenied(
                f"--http {address!r}: the MCP server has no authentication and binds to loopback only; "
                "use 127.0.0.1, ::1 or localhost"
            )
    return host, int(port_text)


def http_url(host: str, port: int) -> str:
    """The URL an MCP client connects to for a server bound at `host:port`."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{MCP_PATH}"


def transport_security(port: int) -> TransportSecuritySettings:
    """DNS-rebinding protection for a loopback server on `port`: only loopback Host and Origin values.

    Parameters:
        port: the bound port; Host headers must carry exactly this port.

    Returns:
        The SDK's transport security settings.
    """
    hosts = [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"http://{host}" for host in hosts],
    )


async def serve_stdio(server: Server[Any]) -> None:
    """Serve one MCP connection over this process's stdin and stdout until stdin closes.

    Parameters:
        server: the MCP server to run.
    """
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(
    server: Server[Any],
    host: str,
    port: int,
    *,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve streamable HTTP on `http://host:port/mcp` until cancelled (Ctrl-C).

    The socket is bound and listening before `on_ready` runs, so a client started on that signal
    never sees a refused connection.

    Parameters:
        server: the MCP server to run.
        host: a loopback address (see `parse_http_address`).
        port: the TCP port.
        on_ready: called with the URL once the socket listens.

    Raises:
        OSError: the address cannot be bound (e.g. the port is in use).
    """
    import uvicorn

    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=host,
        transport_security=transport_security(port),
    )
    bind_host = "127.0.0.1" if host == "localhost" else host
    sock = socket.socket(socket.AF_INET6 if ":" in bind_host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((bind_host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    if on_ready is not None:
        on_ready(http_url(host, port))
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    with sock:
        await uvicorn.Server(config).serve(sockets=[sock])
