"""Round trips over the real transports: `slotrelay mcp serve` as a subprocess, on stdio and on
streamable HTTP bound to 127.0.0.1, driven by the SDK's client; the HTTP server's DNS-rebinding
protection; and the command's refusals of bad options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from mcp import Client, StdioServerParameters

from harness.commands import SLOTRELAY
from harness.ports import free_port
from slotrelay import fsio
from slotrelay.psmr.workspace.store import Store
from tests.support.import_times import IMPORTED
from tests.support.shop_package import make_shop
from tests.support.slotrelay_servers import start_server, stop_server, wait_for_url
from tests.support.waiting import wait_until

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
        command=SLOTRELAY, args=["mcp", "serve", "--workspace", str(shop)], cwd=shop, env=dict(os.environ)
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
    params = StdioServerParameters(command=SLOTRELAY, args=args, cwd=tmp_path, env=dict(os.environ))
    async with Client(params) as client:
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
    assert all(Path(w["root"]) not in (first, second) for w in Store.open().list())


async def test_the_readme_host_config_starts_a_working_server(shop: Path) -> None:
    """The stdio snippet of the docs' MCP page (docs/mcp.md), with its placeholder paths filled in."""
    page = (REPO / "docs" / "mcp.md").read_text()
    snippet = page.split("```json", 1)[1].split("```", 1)[0]
    snippet = snippet.replace("/path/to/slotrelay", str(REPO)).replace("/path/to/your/project", str(shop))
    server = json.loads(snippet)["mcpServers"]["psmr"]
    # The MCP SDK hands a stdio server a minimal environment; the session's state folder is added.
    env = {fsio.STATE_HOME_ENV: os.environ[fsio.STATE_HOME_ENV], "PATH": os.environ["PATH"]}
    params = StdioServerParameters(command=server["command"], args=server["args"], env=env)
    async with Client(params) as client:
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
        (["--http", "0.0.0.0:8765"], "--http '0.0.0.0:8765': the MCP server has no authentication"),
        (["--http", "127.0.0.1:notaport"], "--http '127.0.0.1:notaport': expected HOST:PORT"),
        (["--workspace", "/nonexistent/psmr-folder"], "--workspace /nonexistent/psmr-folder: not a folder"),
        (["--chain", "/nonexistent/node_chain.json"], "--chain /nonexistent/node_chain.json: not a file"),
        (["--allow-write", "/nonexistent/root"], "--allow-write /nonexistent/root: not a folder"),
        (["--http", "127.0.0.1:8765", "--max-sessions", "0"], "--max-sessions"),
    ],
)
def test_serve_refuses_bad_options_with_exit_2_before_importing_the_mcp_sdk(
    shop: Path, args: list[str], message: str
) -> None:
    """Each refusal names the option, and comes before the server's import (the SDK's costs about 1 CPU-s):
    under `python -X importtime`, which writes one line to stderr per module imported, the refusal's log
    names no module of the SDK nor of the server built on it."""
    full = [*args, "--workspace", str(shop)] if "--workspace" not in args else args
    done = subprocess.run(
        [sys.executable, "-X", "importtime", SLOTRELAY, "mcp", "serve", *full],
        check=False, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2, done.stderr
    imported = set(IMPORTED.findall(done.stderr))
    said = "\n".join(line for line in done.stderr.splitlines() if not line.startswith("import time:"))
    # rich wraps the line at the terminal width.
    assert message in " ".join(said.split()), said
    assert "Traceback" not in said
    assert "slotrelay.cli" in imported, "the import log is complete"
    server_side = sorted(name for name in imported if name.split(".")[0] in ("mcp", "psmr_mcp"))
    assert not server_side, server_side


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
    from psmr_mcp.transports import http_url
    from slotrelay.commands.mcp import parse_http_address

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
    from slotrelay.commands.mcp import parse_http_address
    from slotrelay.psmr.errors import PsmrError

    with pytest.raises(PsmrError) as refused:
        parse_http_address(address)
    assert refused.value.code == code


MALFORMED = [
    pytest.param("{not json", None, -32700, id="invalid_json"),
    pytest.param("NaN", None, -32600, id="nan"),  # the SDK's parser reads NaN, as Python's does
    pytest.param(
        '{"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {bad}}', 5, -32700, id="broken_after_id"
    ),
    pytest.param(
        '{"id": 4, "params": ' + "[" * 50_000 + "]" * 49_999 + "}", 4, -32600, id="deep_and_unclosed"
    ),
    pytest.param("[1, 2]", None, -32600, id="array"),
    pytest.param('"a string"', None, -32600, id="non_object"),
    pytest.param('{"jsonrpc": "1.0", "id": 7, "method": "tools/list"}', 7, -32600, id="jsonrpc_1_0"),
    pytest.param(
        '{"jsonrpc": "2.0", "id": "q", "method": "tools/list", "params": [1]}', "q", -32600, id="params_list"
    ),
    pytest.param(
        '{"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": ' + "[" * 500 + "]" * 500 + "}",
        9,
        -32600,
        id="nesting_500",
    ),
    pytest.param(
        '{"jsonrpc": "2.0", "params": ' + "[" * 50_000 + "]" * 50_000 + ', "id": 11, "method": "tools/list"}',
        11,
        -32600,
        id="nesting_50000",
    ),
    pytest.param('{"jsonrpc": "2.0", "id": [1], "method": "tools/list"}', None, -32600, id="id_list"),
    pytest.param('{"jsonrpc": "2.0", "id": null, "method": "tools/list"}', None, -32600, id="id_null"),
    pytest.param('{"jsonrpc": "2.0", "id": true, "method": "tools/list"}', None, -32600, id="id_bool"),
    pytest.param('{"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}', None, -32600, id="id_float"),
    pytest.param(
        '{"jsonrpc": "2.0", "id": "x\\ud800", "method": "ping"}', None, -32600, id="id_lone_surrogate"
    ),
    # Found by tests/fuzz/test_fuzz_mcp_stdio.py: a request that also carries "result" (or "error")
    # validated as a response and was never answered.
    pytest.param(
        '{"jsonrpc": "2.0", "id": 0, "method": "ping", "result": {}, "params": [1]}',
        0,
        -32600,
        id="method_and_result",
    ),
    pytest.param(
        '{"jsonrpc": "2.0", "id": "e", "method": "ping", "error": {"code": 1, "message": "m"}, "params": 2}',
        "e",
        -32600,
        id="method_and_error",
    ),
    # Issue 29: with valid params the same message validated as a request and was run.
    pytest.param(
        '{"jsonrpc": "2.0", "id": "mr", "method": "ping", "result": {}}',
        "mr",
        -32600,
        id="request_and_result",
    ),
    pytest.param(
        '{"jsonrpc": "2.0", "method": "notifications/initialized", "result": {}}',
        None,
        -32600,
        id="notification_and_result",
    ),
]


@pytest.mark.parametrize(("line", "request_id", "code"), MALFORMED)
def test_malformed_stdio_lines_get_a_json_rpc_error(line: str, request_id, code: int) -> None:
    from psmr_mcp.transports import malformed_reply

    reply = malformed_reply(line)
    assert reply is not None and (reply.id, reply.error.code) == (request_id, code), reply
    reply.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8")


@pytest.mark.parametrize(
    "line",
    [
        '{"jsonrpc": "2.0", "id": 1, "method": "ping"}',
        '{"jsonrpc": "2.0", "id": "a", "method": "tools/list", "params": {}}',
        '{"jsonrpc": "2.0", "method": "notifications/initialized"}',
        '{"jsonrpc": "2.0", "id": 3, "result": {}}',
    ],
)
def test_valid_stdio_messages_pass_untouched(line: str) -> None:
    from psmr_mcp.transports import malformed_reply

    assert malformed_reply(line) is None


def stdio_exchange(shop: Path, lines: list[str], *, until: set, log: Path, timeout: float = 60) -> list[dict]:
    """Send lines to a real `slotrelay mcp serve` over stdio; read replies until every id in `until` came."""
    import os
    import select

    with log.open("wb") as sink:
        process = subprocess.Popen(
            [SLOTRELAY, "mcp", "serve", "--workspace", str(shop)],
            cwd=shop,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=sink,
        )
    replies: list[dict] = []
    buffer = b""

    def replied() -> bool:
        """Whether every id in `until` has its reply, or the server closed its stdout (read what came)."""
        nonlocal buffer, replies
        ready, _, _ = select.select([process.stdout], [], [], 0.5)
        if ready:
            chunk = os.read(process.stdout.fileno(), 1 << 16)
            if not chunk:
                return True
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            replies += [json.loads(line) for line in complete if line.strip()]
        return until <= {reply.get("id") for reply in replies}

    try:
        process.stdin.write("".join(line + "\n" for line in lines).encode("utf-8", "surrogatepass"))
        process.stdin.flush()
        # No pause between reads: select waits for the next output.
        wait_until(replied, timeout=timeout, interval=0, what=f"the replies to {sorted(map(str, until))}",
                   details=lambda: f"replies so far: {replies}\n{log.read_text(errors='replace')}")
    finally:
        process.stdin.close()
        process.wait(timeout=30)
        process.stdout.close()
    return replies


def test_regression_malformed_messages_over_stdio_are_answered_and_logged(shop: Path, tmp_path: Path) -> None:
    # Each of these was dropped without a reply or a log line: a client waiting on its id waited forever.
    lines = [
        json.dumps(INITIALIZE),
        '{"jsonrpc": "2.0", "method": "notifications/initialized"}',
        *(case.values[0] for case in MALFORMED),
        '{"jsonrpc": "2.0", "id": "last", "method": "ping"}',
    ]
    with_id = {case.values[1]: case.values[2] for case in MALFORMED if case.values[1] is not None}
    replies = stdio_exchange(shop, lines, until={1, "last", *with_id}, log=tmp_path / "stderr.log")
    by_id = {reply["id"]: reply for reply in replies if reply["id"] is not None}
    assert by_id["last"]["result"] == {} and "result" in by_id[1]
    assert {i: by_id[i]["error"]["code"] for i in with_id} == with_id
    nulls = sorted(reply["error"]["code"] for reply in replies if reply["id"] is None)
    assert nulls == sorted(code for case in MALFORMED for code in [case.values[2]] if case.values[1] is None)
    log = (tmp_path / "stderr.log").read_text()
    assert log.count("stdio: answered a malformed message") == len(MALFORMED)
    assert "Traceback" not in log


def test_regression_idle_http_sessions_expire(shop: Path, tmp_path: Path, monkeypatch) -> None:
    # 2,000 sessions left open grew the server from 111 to 180 MB: sessions now expire when idle.
    monkeypatch.setenv("PSMR_MCP_SESSION_IDLE_TIMEOUT_S", "1")
    server = start_server(
        ["--http", f"127.0.0.1:{free_port()}", "--workspace", str(shop)],
        cwd=shop,
        log=tmp_path / "stderr.log",
    )
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    try:
        url = wait_for_url(server)
        with httpx.Client(timeout=10) as http:
            opened = http.post(url, json=INITIALIZE, headers=headers)
            assert opened.status_code == 200, opened.text
            session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"]}

            def expired() -> bool:
                answer = http.post(url, json=ping, headers=session)
                assert answer.status_code in (200, 404), answer.text
                return answer.status_code == 404

            # Each probe is a request, which keeps the session alive: they come further apart than the
            # idle timeout (1 s), so the session expires between two of them.
            wait_until(expired, timeout=60, interval=1.5, what="the idle session to expire (404)")
            assert http.post(url, json=INITIALIZE, headers=headers).status_code == 200
    finally:
        output = stop_server(server)
    assert "Traceback" not in output, output


def test_a_bad_session_idle_timeout_is_refused_with_exit_2(shop: Path) -> None:
    import os

    done = subprocess.run(
        [SLOTRELAY, "mcp", "serve", "--http", f"127.0.0.1:{free_port()}", "--workspace", str(shop)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PSMR_MCP_SESSION_IDLE_TIMEOUT_S": "soon"},
    )
    assert done.returncode == 2, done.stderr
    # rich wraps the line at the terminal width.
    assert "PSMR_MCP_SESSION_IDLE_TIMEOUT_S='soon': expected a positive number of seconds" in " ".join(
        done.stderr.split()
    )


HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _opened(http: httpx.Client, url: str) -> dict[str, str]:
    """The headers of a new, initialized session."""
    answer = http.post(url, json=INITIALIZE, headers=HEADERS)
    assert answer.status_code == 200, answer.text
    session = {**HEADERS, "mcp-session-id": answer.headers["mcp-session-id"]}
    notified = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert http.post(url, json=notified, headers=session).status_code == 202
    return session


def _json_rpc(answer: httpx.Response) -> dict:
    """The one JSON-RPC message of an answer, sent as JSON or as one server-sent event."""
    if answer.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:] for line in answer.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])
    return answer.json()


def test_regression_a_request_carrying_a_result_is_refused_over_http_not_run(http_server: str) -> None:
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "psmr_query_search", "arguments": {"text": "login"}},
    }
    with httpx.Client(timeout=30) as http:
        session = _opened(http, http_server)
        mixed = http.post(http_server, json={**call, "result": {}}, headers=session)
        broken = http.post(http_server, json={**call, "id": 8, "params": [1]}, headers=session)
        ran = http.post(http_server, json=call, headers=session)
    assert mixed.status_code == 400, mixed.text
    assert mixed.json() == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {
            "code": -32600,
            "message": "Invalid Request: a message has a method or a result or an error, not both",
        },
    }
    # Any message stdio answers with -32600 gets the same answer over HTTP, with its id.
    assert broken.status_code == 400 and (broken.json()["id"], broken.json()["error"]["code"]) == (8, -32600)
    # The session is unharmed: the same call without "result" runs.
    assert ran.status_code == 200 and _json_rpc(ran)["result"]["structuredContent"]["status"] == "ok"


def test_regression_http_sessions_are_capped_and_a_new_one_past_the_cap_gets_503(
    shop: Path, tmp_path: Path
) -> None:
    server = start_server(
        ["--http", f"127.0.0.1:{free_port()}", "--max-sessions", "2", "--workspace", str(shop)],
        cwd=shop,
        log=tmp_path / "stderr.log",
    )
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    try:
        url = wait_for_url(server)
        with httpx.Client(timeout=30) as http:
            first, second = _opened(http, url), _opened(http, url)
            refused = http.post(url, json=INITIALIZE, headers=HEADERS)
            # The sessions already open go on working.
            assert _json_rpc(http.post(url, json=ping, headers=second))["result"] == {}
            assert http.delete(url, headers=first).status_code == 200
            third = _opened(http, url)
            assert _json_rpc(http.post(url, json=ping, headers=third))["result"] == {}
    finally:
        output = stop_server(server)
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["message"] == "Too many open sessions"
    assert "Traceback" not in output, output
