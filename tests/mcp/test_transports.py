"""Round trips over the real transports: `slotrelay mcp serve` as a subprocess, on stdio and on
streamable HTTP bound to 127.0.0.1, driven by the SDK's client; the HTTP server's DNS-rebinding
protection; and the command's refusals of bad options."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest
from mcp import Client, StdioServerParameters

from tests.conftest import free_port
from tests.mcp.processes import SLOTRELAY, start_server, stop_server, wait_for_url
from tests.mcp.shop import make_shop

pytestmark = pytest.mark.anyio
REPO = Path(__file__).resolve().parents[2]

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


async def _search_login(client: Client) -> dict:
    tools = await client.list_tools()
    assert "psmr_query_subgraph" in {tool.name for tool in tools.tools}
    result = await client.call_tool("psmr_query_search", {"text": "login", "kind": "symbol"})
    assert not result.is_error, result.content
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


async def test_stdio_round_trip_through_the_cli(shop: Path) -> None:
    params = StdioServerParameters(
        command=SLOTRELAY, args=["mcp", "serve", "--workspace", str(shop)], cwd=shop
    )
    async with Client(params) as client:
        answer = await _search_login(client)
    assert answer["status"] == "ok"
    assert any("shop.auth.login" in json.dumps(item) for item in answer["data"]["matches"])


async def test_stdio_serving_several_workspaces_in_one_store(tmp_path: Path) -> None:
    """Two --workspace folders and --store: tools need workspace_id, describe lists both, and a diff
    across the two works because both live in the one store."""
    first, second = make_shop(tmp_path / "first"), make_shop(tmp_path / "second")
    args = [
        "mcp",
        "serve",
        "--workspace",
        str(first),
        "--workspace",
        str(second),
        "--store",
        str(tmp_path / "st"),
    ]
    async with Client(StdioServerParameters(command=SLOTRELAY, args=args, cwd=tmp_path)) as client:
        listed = (await client.call_tool("psmr_workspace_describe", {})).structured_content
        served = listed["data"]["served_workspaces"]
        assert [w["root"] for w in served] == [str(first), str(second)]
        missing = await client.call_tool("psmr_query_search", {"text": "login"})
        assert missing.is_error and missing.content[0].text.startswith(
            "INVALID_QUERY: workspace_id is required"
        )
        pair = {"workspace_a": served[0]["workspace_id"], "workspace_b": served[1]["workspace_id"]}
        diff = await client.call_tool("psmr_semantic_diff", pair)
    assert not diff.is_error, diff.content[0].text
    assert (tmp_path / "st").is_dir() and not (first / ".psmr").exists()


async def test_the_readme_host_config_starts_a_working_server(shop: Path) -> None:
    """The stdio snippet of the README's MCP section, with its placeholder paths filled in."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("## PSMR over MCP", 1)[1]
    snippet = section.split("```json", 1)[1].split("```", 1)[0]
    snippet = snippet.replace("/path/to/slotrelay", str(REPO)).replace("/path/to/your/project", str(shop))
    server = json.loads(snippet)["mcpServers"]["psmr"]
    async with Client(StdioServerParameters(command=server["command"], args=server["args"])) as client:
        answer = await _search_login(client)
    assert answer["status"] == "ok"


async def test_http_round_trip_on_loopback(http_server: str) -> None:
    assert http_server.startswith("http://127.0.0.1:") and http_server.endswith("/mcp")
    async with Client(http_server) as client:
        answer = await _search_login(client)
    assert answer["status"] == "ok"


def test_http_refuses_a_foreign_host_or_origin(http_server: str) -> None:
    """DNS rebinding: a page on evil.example resolving to 127.0.0.1 must not reach the tools."""
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    port = http_server.split(":")[2].split("/")[0]
    with httpx.Client(timeout=10) as http:
        foreign_host = http.post(
            http_server, json=INITIALIZE, headers={**headers, "Host": f"evil.example:{port}"}
        )
        foreign_origin = http.post(
            http_server, json=INITIALIZE, headers={**headers, "Origin": "http://evil.example"}
        )
        local = http.post(
            http_server, json=INITIALIZE, headers={**headers, "Origin": f"http://localhost:{port}"}
        )
    assert foreign_host.status_code == 421
    assert foreign_origin.status_code == 403
    assert local.status_code == 200


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--http", "0.0.0.0:8765"], "loopback only"),
        (["--http", "127.0.0.1:notaport"], "expected HOST:PORT"),
        (["--workspace", "/nonexistent/psmr-folder"], "not a folder"),
    ],
)
def test_serve_refuses_bad_options_with_exit_2(shop: Path, args: list[str], message: str) -> None:
    full = [*args, "--workspace", str(shop)] if "--workspace" not in args else args
    done = subprocess.run(
        [SLOTRELAY, "mcp", "serve", *full], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr


def test_serve_reports_a_port_in_use(shop: Path, tmp_path: Path) -> None:
    port = free_port()
    first = start_server(
        ["--http", f"127.0.0.1:{port}", "--workspace", str(shop)], cwd=shop, log=tmp_path / "log"
    )
    try:
        wait_for_url(first)
        done = subprocess.run(
            [SLOTRELAY, "mcp", "serve", "--http", f"127.0.0.1:{port}", "--workspace", str(shop)],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        stop_server(first)
    assert done.returncode == 2
    assert "cannot listen" in done.stderr


@pytest.mark.parametrize(
    ("address", "host", "port", "url"),
    [
        ("127.0.0.1:8765", "127.0.0.1", 8765, "http://127.0.0.1:8765/mcp"),
        ("localhost:1", "localhost", 1, "http://localhost:1/mcp"),
        ("[::1]:65535", "::1", 65535, "http://[::1]:65535/mcp"),
        ("127.0.0.2:80", "127.0.0.2", 80, "http://127.0.0.2:80/mcp"),
    ],
)
def test_http_addresses_on_loopback_are_accepted(address: str, host: str, port: int, url: str) -> None:
    from psmr_mcp.transports import http_url, parse_http_address

    assert parse_http_address(address) == (host, port)
    assert http_url(host, port) == url


@pytest.mark.parametrize(
    ("address", "code"),
    [
        ("8765", "INVALID_QUERY"),
        ("127.0.0.1:0", "INVALID_QUERY"),
        ("127.0.0.1:70000", "INVALID_QUERY"),
        ("192.168.1.5:8765", "CAPABILITY_DENIED"),
        ("example.com:8765", "CAPABILITY_DENIED"),
        ("[::]:8765", "CAPABILITY_DENIED"),
    ],
)
def test_http_addresses_off_loopback_or_malformed_are_refused(address: str, code: str) -> None:
    from psmr_mcp.transports import parse_http_address
    from slotrelay.psmr.errors import PsmrError

    with pytest.raises(PsmrError) as refused:
        parse_http_address(address)
    assert refused.value.code == code
