"""The host side of the egress allow-list: an HTTP proxy on a unix socket, one per run.

The sandbox keeps no network of its own; its only way out is this socket, bound into it and
exposed inside on 127.0.0.1:3128 by `runtime/egress_shim.py`. The proxy reads one request head
per connection and admits it only when the target host, by name, is on the run's allow-list:
`CONNECT host:port` (HTTPS), an absolute `http://host/...` URL, or a `Host:` header. IP
literals, other ports and unlisted names are refused with 403 and recorded as `network`
violations. Names are resolved here, on the host, and only for admitted hosts, so nothing
inside the sandbox can use DNS to leak data.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import threading
from pathlib import Path
from urllib.parse import urlsplit

from slotrelay.sandbox.limits import Violation

SHIM_PORT = 3128
_HEAD_MAX = 64 << 10
_CONNECT_TIMEOUT_S = 10


def host_allowed(host: str, port: int, allow: tuple[str, ...]) -> bool:
    """Whether `host:port` matches the allow-list (a bare entry admits ports 80 and 443).

    Parameters:
        host: the name asked for (IP literals never match).
        port: the port asked for.
        allow: entries `host`, `host:port` or `*.domain` (which admits subdomains).
    """
    host = host.lower().rstrip(".")
    try:
        ipaddress.ip_address(host.strip("[]"))
        return False
    except ValueError:
        pass
    for entry in allow:
        name, _, wanted = entry.partition(":")
        ports = {int(wanted)} if wanted else {80, 443}
        if port not in ports:
            continue
        if name == host or (name.startswith("*.") and host.endswith(name[1:])):
            return True
    return False


def _valid_port(port: str) -> bool:
    return port.isdigit() and 0 < int(port) < 65536


def request_target(head: bytes) -> tuple[str, str, int, bytes] | None:
    """(method, host, port, head rewritten for the origin server) of a request head, or None."""
    lines = head.split(b"\r\n")
    try:
        method, target, version = lines[0].decode("latin-1").split(" ")
    except ValueError:
        return None
    if method == "CONNECT":
        host, _, port_text = target.rpartition(":")
        return (method, host.strip("[]"), int(port_text), b"") if _valid_port(port_text) else None
    if target.startswith("http://"):
        url = urlsplit(target)
        try:
            port = url.port or 80
        except ValueError:
            return None
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        lines[0] = f"{method} {path} {version}".encode("latin-1")
        return method, url.hostname or "", port, b"\r\n".join(lines)
    for line in lines[1:]:
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "host":
            host, _, port_text = value.strip().rpartition(":")
            if not host:
                host, port_text = value.strip(), "80"
            return (method, host.strip("[]"), int(port_text), head) if _valid_port(port_text) else None
    return None


def _pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)


class EgressProxy:
    """A per-run allow-list proxy listening on a unix socket.

    Parameters:
        path: where to bind the socket (inside the folder bound into the sandbox).
        allow: the run's `network.allow` entries.
    """

    def __init__(self, path: Path, allow: tuple[str, ...]) -> None:
        self._path = path
        self._allow = allow
        self._refused: list[Violation] = []
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Bind the socket (readable and writable by the sandbox's uid) and start accepting."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self._path))
        os.chmod(self._path, 0o666)
        listener.listen(64)
        self._listener = listener
        self._thread = threading.Thread(
            target=self._accept, args=(listener,), name="sandbox-egress", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Close the listener and every open connection."""
        if self._listener is not None:
            # shutdown wakes the accept() blocked in the other thread; close alone does not.
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            for sock in self._sockets:
                sock.close()
            self._sockets.clear()
        self._path.unlink(missing_ok=True)

    def refusals(self) -> list[Violation]:
        """A `network` violation for each request refused so far."""
        with self._lock:
            return list(self._refused)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            with self._lock:
                self._sockets.append(client)
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _refuse(self, client: socket.socket, what: str) -> None:
        with self._lock:
            self._refused.append(Violation(kind="network", detail=f"egress refused: {what}"))
        body = f"slotrelay egress: {what} is not on the allow-list\n".encode()
        head = f"HTTP/1.1 403 Forbidden\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        with contextlib.suppress(OSError):
            client.sendall(head.encode() + body)
        client.close()

    def _handle(self, client: socket.socket) -> None:
        try:
            self._serve(client)
        except OSError:
            # The sandbox hung up or was killed mid-request; nothing to report.
            client.close()

    def _serve(self, client: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head and len(head) < _HEAD_MAX:
            chunk = client.recv(4096)
            if not chunk:
                client.close()
                return
            head += chunk
        head, _, rest = head.partition(b"\r\n\r\n")
        target = request_target(head)
        if target is None:
            self._refuse(client, "a request that names no host")
            return
        method, host, port, forward = target
        if not host_allowed(host, port, self._allow):
            self._refuse(client, f"{method} {host}:{port}")
            return
        try:
            upstream = socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT_S)
            upstream.settimeout(None)
        except OSError as error:
            reply = f"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n{host}:{port}: {error}\n"
            client.sendall(reply.encode())
            client.close()
            return
        with self._lock:
            self._sockets.append(upstream)
        if method == "CONNECT":
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                upstream.sendall(rest)
        else:
            upstream.sendall(forward + b"\r\n\r\n" + rest)
        threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()
        _pipe(client, upstream)
