"""Fixtures for the PSMR MCP server tests: the sample package and its workspace, a registry serving
it, the HTTP server as a subprocess for the session, and the Node MCP clients."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.ports import free_port
from psmr_mcp import WorkspaceRegistry
from tests.support.services import require_service
from tests.support.shop_package import make_shop
from tests.support.slotrelay_servers import start_server, stop_server, wait_for_url

NODE_BIN = Path(__file__).with_name("node_modules") / ".bin"


@pytest.fixture(scope="session")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample package's root, with its workspace already built into the session's store."""
    from slotrelay.psmr import api

    root = make_shop(tmp_path_factory.mktemp("shop") / "shop")
    api.build_workspace(root)
    return root


@pytest.fixture
def registry(shop: Path) -> WorkspaceRegistry:
    """A registry serving the sample package as the one (default) workspace."""
    registry = WorkspaceRegistry([shop])
    registry.build(shop, at_startup=True)
    return registry


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def http_server(shop: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`slotrelay mcp serve --http 127.0.0.1:PORT` on the sample package for the session; yields its URL."""
    log = tmp_path_factory.mktemp("http-server") / "stderr.log"
    server = start_server(["--http", f"127.0.0.1:{free_port()}", "--workspace", str(shop)], cwd=shop, log=log)
    try:
        yield wait_for_url(server)
    finally:
        output = stop_server(server)
    # Every client of the session (SDK, Inspector, conformance suite) is done: none may have crashed it.
    assert "Traceback" not in output, output


@pytest.fixture(scope="session")
def node_tools() -> Path:
    """The folder of the Node MCP clients (`scripts/bootstrap.sh` installs them); skips or fails without."""
    require_service(
        all((NODE_BIN / tool).exists() for tool in ("node", "inspector", "conformance")),
        "the Node MCP clients are not installed in tests/mcp/node_modules (run scripts/bootstrap.sh)",
    )
    return NODE_BIN
