"""The two ways the PSMR MCP server talks: stdio (an MCP host starts it) and streamable HTTP.

Stdio answers what it cannot read: the SDK's stdio reader drops a line that is not JSON or not a
JSON-RPC message without a word, so a client waiting on that id waits forever. Here every line is
checked before the SDK sees it (`malformed_reply`), and a bad one is answered as the HTTP transport
does: -32700 when it is not JSON, -32600 when it is not a valid message, with the request's id
whenever it can be read (else null), plus a warning in the log.

Over HTTP a POST's message gets the same check before the SDK reads it (`MalformedMessageGuard`),
answered with status 400 and the same JSON-RPC error: the SDK's own check lets a request that also
carries `result` through, and runs it.

HTTP sessions left open expire after `PSMR_MCP_SESSION_IDLE_TIMEOUT_S` seconds without a request
(default 600), so abandoned clients do not grow the server; at most `--max-sessions` are live at once
and a request that would open one more is answered 503 by the SDK's session manager.

HTTP binds to loopback only: the server has no authentication, so reaching it from another machine
would hand the workspace to anyone on the network. Host and Origin headers are checked against
the exact bound address (DNS-rebinding protection), so a web page that resolves its own name to
127.0.0.1 is refused with 421/403 before any MCP message is read.
"""

from __future__ import annotations

import fcntl
import io
import json
import logging
import os
import re
from collections.abc import Callable
from typing import Any

import anyio
import pydantic_core
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import (
    DEFAULT_MAX_REQUEST_BODY_SIZE,
    RequestBodyLimitMiddleware,
    TransportSecurityMiddleware,
    TransportSecuritySettings,
)
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from slotrelay.loopback import listening_socket, loopback_hosts, loopback_url

MCP_PATH = "/mcp"
logger = logging.getLogger(__name__)


def http_url(host: str, port: int) -> str:
    """The URL an MCP client connects to for a server bound at `host:port`."""
    return loopback_url(host, port, MCP_PATH)


def transport_security(port: int) -> TransportSecuritySettings:
    """DNS-rebinding protection for a loopback server on `port`: only loopback Host and Origin values.

    Parameters:
        port: the bound port; Host headers must carry exactly this port.

    Returns:
        The SDK's transport security settings.
    """
    hosts = loopback_hosts(port)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"http://{host}" for host in hosts],
    )


def malformed_reply(line: str) -> JSONRPCError | None:
    """The JSON-RPC error that answers one stdio line the SDK could not read, or None when it can.

    Parameters:
        line: one line from the client, as the SDK's reader would get it.

    Returns:
        None for a valid JSON-RPC message; -32700 for a line that is not JSON; -32600 for JSON that
        is not a valid message (a non-object, `jsonrpc` 1.0, an `id` that is not an integer or a
        string, text the SDK's parser refuses such as nesting too deep for it). The reply carries
        the request's id when one can be read and is an integer or a string, else null: a client
        waiting on an id is answered even when the rest of its message is broken.
    """
    try:
        message = jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError as invalid:
        problem = invalid.errors()[0]["msg"]
        try:
            # NaN and Infinity are read, as the SDK's parser reads them.
            document = json.loads(line)
        except ValueError as not_json:
            return _error(PARSE_ERROR, f"Parse error: {not_json}", _usable_id(_top_level_id(line)))
        except RecursionError:
            return _error(
                INVALID_REQUEST, "Invalid Request: nested too deeply", _usable_id(_top_level_id(line))
            )
        request_id = document.get("id") if isinstance(document, dict) else None
        return _error(INVALID_REQUEST, f"Invalid Request: {problem}", _usable_id(request_id))
    # The SDK's models ignore unknown members, so malformed messages validate as something else: a
    # request whose id is neither an integer nor a string as a notification (never answered); one
    # that also carries "result" or "error" as a request (run) or as a response (dropped).
    # The parser that has just read it; the stdlib's limits differ.
    document = pydantic_core.from_json(line)
    if "method" in document and ("result" in document or "error" in document):
        problem = "Invalid Request: a message has a method or a result or an error, not both"
        return _error(INVALID_REQUEST, problem, _usable_id(document.get("id")))
    if isinstance(message, JSONRPCNotification) and "id" in document:
        return _error(INVALID_REQUEST, "Invalid Request: id must be an integer or a string", None)
    return None


def _usable_id(request_id: Any) -> int | str | None:
    """A request id a reply can carry: an integer (not a boolean) or text that can be encoded."""
    if type(request_id) is int:
        return request_id
    if isinstance(request_id, str):
        try:
            request_id.encode("utf-8")
        except UnicodeEncodeError:
            return None
        return request_id
    return None


_JSON_SYNTAX = re.compile(r'["{}\[\]]')
_JSON_SPACE = re.compile(r"[ \t\r\n]*")


def _top_level_id(line: str) -> Any:
    """The value of the top-level `id` member of a JSON object, read without parsing the rest.

    For a message that cannot be parsed (broken further on, or nested too deeply): the id still
    names the request a client waits on.
    Strings are decoded one at a time (they are flat), brackets are counted, so the scan is
    iterative and linear. None when there is no such member or the text around it is not JSON.
    """
    decoder = json.JSONDecoder()
    text = line.strip()
    if not text.startswith("{"):
        return None
    depth, at = 0, 0
    while (found := _JSON_SYNTAX.search(text, at)) is not None:
        at = found.start()
        if text[at] != '"':
            depth += 1 if text[at] in "{[" else -1
            at += 1
            continue
        try:
            key, at = decoder.raw_decode(text, at)
        except ValueError:
            return None
        space = _JSON_SPACE.match(text, at)
        assert space is not None  # the pattern matches the empty string
        colon = space.end()
        if depth == 1 and key == "id" and text.startswith(":", colon):
            value = text[colon + 1 :].lstrip()
            try:
                return decoder.raw_decode(value)[0]
            except (ValueError, RecursionError):
                return None
    return None


def _error(code: int, message: str, request_id: int | str | None) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message[:500]))


class _CheckedLines:
    """The client's stdin lines as the SDK's stdio reader iterates them, minus the malformed ones.

    A malformed line is answered here, through the same write stream the server answers on (so
    replies never interleave on stdout), and is not passed on; a blank line is no message and is
    skipped. The write stream exists only once `stdio_server` has started, and its reader may meet
    a bad line before that: replies wait for `answer_on`.
    """

    def __init__(self, source: anyio.AsyncFile[str]) -> None:
        self._source = source
        self._replies: Any = None
        self._ready = anyio.Event()

    def answer_on(self, write_stream: Any) -> None:
        """Send replies to malformed lines on this stream (the server's write stream)."""
        self._replies = write_stream
        self._ready.set()

    def __aiter__(self) -> _CheckedLines:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self._source.readline()
            if not line:
                raise StopAsyncIteration
            if not line.strip(" \t\r\n"):
                continue
            reply = malformed_reply(line)
            if reply is None:
                return line
            logger.warning(
                "stdio: answered a malformed message (%d characters) with %d: %s (id %s)",
                len(line),
                reply.error.code,
                reply.error.message,
                json.dumps(reply.id),
            )
            await self._ready.wait()
            try:
                await self._replies.send(SessionMessage(reply))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                raise StopAsyncIteration from None


def _claim_stdin() -> int:
    """A private duplicate of fd 0 that carries the client's messages; fd 0 then reads the null device.

    The SDK's `stdio_server` does this itself only for the stdin it opens; given our own stdin, it
    leaves fd 0 alone, and a handler or a child process reading fd 0 could take part of a message.
    """
    wire = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    return wire


async def serve_stdio(server: Server[Any]) -> None:
    """Serve one MCP connection over this process's stdin and stdout until stdin closes.

    Every line that is not a valid JSON-RPC message is answered with a JSON-RPC error and logged
    (see `malformed_reply`); valid ones go to the SDK's stdio transport unchanged.

    Parameters:
        server: the MCP server to run.
    """
    wire = _claim_stdin()
    # closefd=False: a worker thread may still block reading the wire after we return.
    text = io.TextIOWrapper(os.fdopen(wire, "rb", closefd=False), encoding="utf-8", errors="replace")
    lines = _CheckedLines(anyio.wrap_file(text))
    try:
        async with stdio_server(stdin=lines) as (read_stream, write_stream):  # type: ignore[arg-type]
            lines.answer_on(write_stream)
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        os.dup2(wire, 0)


class MalformedMessageGuard:
    """ASGI middleware answering a POSTed message that is not a valid JSON-RPC message, as stdio does.

    The message is checked with `malformed_reply`, after the request's Host, Origin and Content-Type
    (the SDK's transport security, so a foreign page learns nothing more than before) and within the
    SDK's body size limit (the caller wraps this in `RequestBodyLimitMiddleware`). A bad one is
    answered 400 with its JSON-RPC error and logged; a good one goes to the SDK unchanged.

    Parameters:
        app: the SDK's streamable HTTP application.
        security: the transport security settings the SDK checks too.
    """

    def __init__(self, app: ASGIApp, *, security: TransportSecuritySettings) -> None:
        self.app = app
        self.security = TransportSecurityMiddleware(security)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != MCP_PATH:
            await self.app(scope, receive, send)
            return
        refused = await self.security.validate_request(Request(scope), is_post=True)
        if refused is not None:
            await refused(scope, receive, send)
            return
        messages: list[Message] = []
        body = bytearray()
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        reply = malformed_reply(body.decode("utf-8", errors="replace"))
        if reply is None:

            async def replay() -> Message:
                return messages.pop(0) if messages else await receive()

            await self.app(scope, replay, send)
            return
        logger.warning(
            "http: answered a malformed message (%d bytes) with %d: %s (id %s)",
            len(body),
            reply.error.code,
            reply.error.message,
            json.dumps(reply.id),
        )
        answer = Response(
            reply.model_dump_json(by_alias=True, exclude_unset=True),
            status_code=400,
            media_type="application/json",
        )
        await answer(scope, receive, send)


async def serve_http(
    server: Server[Any],
    host: str,
    port: int,
    *,
    on_ready: Callable[[str], None] | None = None,
    idle_timeout_s: float,
    max_sessions: int,
) -> None:
    """Serve streamable HTTP on `http://host:port/mcp` until cancelled (Ctrl-C).

    The socket is bound and listening before `on_ready` runs, so a client started on that signal
    never sees a refused connection.

    Parameters:
        server: the MCP server to run.
        host: a loopback address (`slotrelay mcp serve` checks `--http`: `parse_http_address`).
        port: the TCP port.
        on_ready: called with the URL once the socket listens.
        idle_timeout_s: a session with no request for this long is closed (`session_idle_timeout` of
            `slotrelay mcp serve`).
        max_sessions: live sessions at most; a request that would open another is answered 503.

    Raises:
        OSError: the address cannot be bound (e.g. the port is in use).
    """
    import uvicorn

    security = transport_security(port)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=host,
        transport_security=security,
        session_idle_timeout=idle_timeout_s,
        max_sessions=max_sessions,
    )
    guarded = RequestBodyLimitMiddleware(
        MalformedMessageGuard(app, security=security), DEFAULT_MAX_REQUEST_BODY_SIZE
    )
    sock = listening_socket(host, port)
    if on_ready is not None:
        on_ready(http_url(host, port))
    config = uvicorn.Config(guarded, log_level="warning", lifespan="on")
    with sock:
        await uvicorn.Server(config).serve(sockets=[sock])
