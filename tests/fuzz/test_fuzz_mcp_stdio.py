"""Fuzzed MCP traffic over stdio: every request with an id gets a response, from a real server process.

One `slotrelay mcp serve` runs for the module; each example sends a few lines (JSON-RPC-shaped
objects with odd versions, ids, methods and params, any JSON, any text, deep nesting), then a `ping`
with a fresh id. The example passes when, before a deadline, a reply has come for the ping and for
every line that is a request with an id a reply can carry (an integer or a string), every line that
is not JSON has had a parse error (-32700), and the server is still running. Usable ids are made
unique per example so a reply cannot be mistaken for another's.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.commands import SLOTRELAY
from tests.support.shop_package import make_shop

REPLY_DEADLINE_S = 60
JSON_BLANKS = " \t\r\n"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "fuzz", "version": "1"},
    },
}


class StdioServer:
    """A `slotrelay mcp serve` on stdio, with a thread collecting its replies."""

    def __init__(self, workspace: Path, log: Path) -> None:
        with log.open("wb") as sink:
            self.process = subprocess.Popen(
                [SLOTRELAY, "mcp", "serve", "--workspace", str(workspace)],
                cwd=workspace,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=sink,
            )
        self.log = log
        self.replies: list[Any] = []
        self.changed = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for raw in self.process.stdout:
            with self.changed:
                self.replies.append(json.loads(raw))
                self.changed.notify_all()

    def send(self, lines: list[str]) -> None:
        self.process.stdin.write("".join(line + "\n" for line in lines).encode("utf-8", "surrogatepass"))
        self.process.stdin.flush()

    def wait_for(self, ids: set[Any], since: int) -> list[Any]:
        """The replies after index `since`, once every id in `ids` has one (fails at the deadline)."""
        deadline = time.monotonic() + REPLY_DEADLINE_S
        with self.changed:
            while not ids <= {reply.get("id") for reply in self.replies[since:] if isinstance(reply, dict)}:
                left = deadline - time.monotonic()
                assert left > 0 and self.process.poll() is None, (
                    ids,
                    self.replies[since:],
                    self.log.read_text(),
                )
                self.changed.wait(timeout=min(left, 1.0))
            return list(self.replies[since:])

    def stop(self) -> str:
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.reader.join(timeout=10)
        self.process.stdout.close()
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StdioServer]:
    folder = tmp_path_factory.mktemp("mcp-fuzz")
    running = StdioServer(make_shop(folder / "shop"), folder / "stderr.log")
    running.send([json.dumps(INITIALIZE), '{"jsonrpc": "2.0", "method": "notifications/initialized"}'])
    running.wait_for({"init"}, 0)
    yield running
    log = running.stop()
    assert running.process.returncode == 0, log
    assert "Traceback" not in log, log


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
ids = (
    st.integers()
    | st.text(max_size=12)
    | st.floats()
    | st.booleans()
    | st.none()
    | st.lists(st.integers(), max_size=2)
)
methods = st.sampled_from(
    [
        "ping",
        "tools/list",
        "tools/call",
        "initialize",
        "resources/list",
        "prompts/get",
        "notifications/initialized",
        "notifications/cancelled",
    ]
) | st.text(max_size=12)
deep = st.integers(min_value=100, max_value=20_000).map(lambda depth: "[" * depth + "]" * depth)


@st.composite
def rpc_shaped(draw: st.DrawFn) -> str:
    """A JSON-RPC-shaped object, some members missing or of the wrong kind, params sometimes very deep."""
    message: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        message["jsonrpc"] = draw(st.sampled_from(["2.0", "2.0", "1.0", 2, None]))
    if draw(st.booleans()):
        message["id"] = draw(ids)
    if draw(st.integers(0, 9)):
        message["method"] = draw(methods)
    if draw(st.booleans()):
        message["params"] = draw(st.dictionaries(st.text(max_size=6), json_values, max_size=3) | json_values)
    if not draw(st.integers(0, 9)):
        message[draw(st.sampled_from(["result", "error"]))] = draw(json_values)
    text = json.dumps(message)
    if not draw(st.integers(0, 9)):
        message.pop("params", None)
        text = json.dumps(message)[:-1] + (", " if message else "") + '"params": ' + draw(deep) + "}"
    return text


lines = st.one_of(
    rpc_shaped(),
    json_values.map(json.dumps),
    deep,
    st.text(alphabet=st.characters(blacklist_characters="\r\n"), min_size=1, max_size=40),
)
_fresh = itertools.count()


def _usable(request_id: Any) -> bool:
    if type(request_id) is int:
        return True
    if isinstance(request_id, str):
        try:
            request_id.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    return False


def _with_fresh_ids(line: str) -> tuple[str, Any]:
    """The line with a usable request id replaced by a fresh one of the same type; and that id (or None)."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return line, None
    if not isinstance(message, dict) or "id" not in message or not _usable(message["id"]):
        return line, None
    number = next(_fresh)
    message["id"] = number + 10**6 if type(message["id"]) is int else f"fuzz-{number}"
    is_request = "method" in message or not ({"result", "error"} & set(message))
    return json.dumps(message), message["id"] if is_request else None


def _is_json(line: str) -> bool:
    """Whether the line is JSON; one nested too deeply to parse counts as JSON (-32600, not -32700)."""
    try:
        json.loads(line)
    except ValueError:
        return False
    except RecursionError:
        return True
    return True


@settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(lines, min_size=1, max_size=4))
def test_every_request_with_an_id_gets_a_response(server: StdioServer, batch: list[str]) -> None:
    sent, expected = [], set()
    for line in batch:
        fresh, request_id = _with_fresh_ids(line)
        sent.append(fresh)
        if request_id is not None:
            expected.add(request_id)
    sentinel = f"sentinel-{next(_fresh)}"
    since = len(server.replies)
    server.send([*sent, json.dumps({"jsonrpc": "2.0", "id": sentinel, "method": "ping"})])
    replies = server.wait_for({*expected, sentinel}, since)
    not_json = sum(1 for line in sent if line.strip(JSON_BLANKS) and not _is_json(line))
    parse_errors = sum(1 for reply in replies if reply.get("error", {}).get("code") == -32700)
    assert parse_errors >= not_json, (sent, replies)
