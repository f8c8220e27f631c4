"""Fixtures of the sandbox tests: each backend (real Docker daemon, real bwrap), and a local HTTP host.

Every test that runs code takes `backend`, which is parametrized over docker and bwrap and
carries the matching marker; a backend that cannot run here is skipped locally and fails in CI.
The docker backend is the process-wide one, so its pool is shared by the whole session.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from slotrelay.sandbox import SandboxUnavailable, get_backend
from tests.support.services import require_service


@functools.cache
def images_built() -> bool:
    """Build the images this checkout needs when a daemon answers (a no-op when current, as in CI)."""
    from slotrelay.sandbox import images
    from slotrelay.sandbox.daemon import docker_client

    try:
        client = docker_client()
    except SandboxUnavailable:
        return False
    try:
        images.build_images(client, say=lambda line: None)
    finally:
        client.close()
    return True


def _usable(name: str) -> str:
    if name == "docker":
        images_built()
    try:
        get_backend(name, lang="python")
    except SandboxUnavailable as missing:
        require_service(False, f"the {name} sandbox cannot run python here: {missing.message}")
    return name


@pytest.fixture(
    params=[
        pytest.param("docker", marks=pytest.mark.docker),
        pytest.param("bwrap", marks=pytest.mark.bwrap),
    ]
)
def backend(request: pytest.FixtureRequest) -> str:
    """The name of a backend that can run code here."""
    return _usable(request.param)


@pytest.fixture
def bwrap_ready() -> str:
    """The bwrap backend's name, once it is known to run here."""
    return _usable("bwrap")


@pytest.fixture
def docker_backend():
    """The process-wide docker backend (its pool included)."""
    return get_backend(_usable("docker"), lang="python")


class HostLog:
    """The requests a `LocalHost` received (paths), so a test can tell what got out."""

    def __init__(self) -> None:
        self.paths: list[str] = []


@pytest.fixture(scope="session")
def local_host() -> Iterator[tuple[int, HostLog]]:
    """An HTTP server on 127.0.0.1 answering `hello from <path>`; yields its port and its request log."""
    log = HostLog()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            log.paths.append(self.path)
            body = f"hello from {self.path}".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], log
    server.shutdown()
    server.server_close()
