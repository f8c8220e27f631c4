"""Loopback addresses for the two servers without authentication: the MCP server's HTTP transport
(`psmr_mcp`) and the PSMR view (`psmr_view`).

Both bind a loopback address only, accept only the Host values a browser sends to it, and bind their
socket before announcing the URL; the pieces they share live here, below both, so neither imports the
other.
"""

from __future__ import annotations

import ipaddress
import socket

LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback IP addresses (127.0.0.0/8, ::1), with or without brackets."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def loopback_hosts(port: int) -> list[str]:
    """The Host header values a browser sends to a loopback server on `port`."""
    return [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"]


def loopback_url(host: str, port: int, path: str) -> str:
    """The URL of `path` on a server bound at `host:port` (an IPv6 host in brackets)."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{path}"


def bind_address(host: str) -> str:
    """The address to bind for `host`: `localhost` binds 127.0.0.1, anything else binds itself."""
    return "127.0.0.1" if host == "localhost" else host


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to `bind_address(host)` and `port`, already listening.

    Listening before the URL is announced means a client started on that signal never meets a
    refused connection.

    Raises:
        OSError: the address cannot be bound (e.g. the port is in use).
    """
    bind_host = bind_address(host)
    sock = socket.socket(socket.AF_INET6 if ":" in bind_host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((bind_host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock
