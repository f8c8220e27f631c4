"""Run the view under uvicorn on a loopback socket, bound before the address is announced.

The socket is bound and listening before `on_ready` runs, so a browser or test started on that
signal never meets a refused connection; with port 0 the system picks a free port, and the app
is created afterwards so its Host check names the port actually bound.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from psmr_view.app import create_app
from slotrelay.loopback import bind_address, is_loopback, listening_socket, loopback_hosts, loopback_url


class NotLoopback(ValueError):
    """The host to bind is not a loopback address."""


def require_loopback(host: str) -> None:
    """Refuse a host to bind that is not a loopback address.

    Raises:
        NotLoopback: saying why and what to use instead.
    """
    if not is_loopback(host):
        raise NotLoopback(
            f"--host {host}: the PSMR view has no authentication and binds loopback only; use 127.0.0.1, "
            "::1 or localhost (an SSH tunnel reaches it from elsewhere)"
        )


def serve(
    store: Path,
    *,
    host: str = "127.0.0.1",
    port: int = 8766,
    workspace_id: str | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve the view over `store` until interrupted (Ctrl-C).

    Parameters:
        store: the PSMR store folder.
        host: a loopback address or `localhost`.
        port: the TCP port (0: any free one).
        workspace_id: the workspace `/` opens.
        on_ready: called with the URL once the socket listens.

    Raises:
        NotLoopback: `host` is not a loopback address.
        OSError: the address cannot be bound (e.g. the port is in use).
    """
    import uvicorn

    require_loopback(host)
    bind_host = bind_address(host.strip("[]"))
    sock = listening_socket(bind_host, port)
    bound = sock.getsockname()[1]
    app = create_app(store, hosts=loopback_hosts(bound), workspace_id=workspace_id)
    if on_ready is not None:
        on_ready(loopback_url(bind_host, bound, f"/ws/{workspace_id}/" if workspace_id else "/"))
    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    with sock:
        asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))
