"""A real OpenAI-compatible HTTP server on 127.0.0.1 for the pen's tests, with scripted replies.

Each request pops the next scripted `Reply` (status, JSON or raw body, content type, a hold, headers,
or a body cut off mid-way); when the script is empty, code requests get `default_code` (or the
`code_by_keyword` entry whose word the intent contains) in a fenced block and suggestion requests get
`suggestion`. Every request body is kept in `requests`, so a test can check what reached the model.
`stream_reply` builds the server-sent events a streaming server answers with.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

SUM_CODE = "def main(inputs):\n    return {'total': sum(inputs['numbers'])}\n"
# How long a held reply waits for its release at most: far past any client's timeout in the tests.
HOLD_S = 60


@dataclass
class Reply:
    """One scripted answer."""

    status: int = 200
    body: Any = None
    raw: bytes | None = None
    # Answered only once the test sets it (or HOLD_S pass): a reply that comes after the client gave up.
    hold: threading.Event | None = None
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str | None = None
    # Send half the body in a chunked answer and close the connection, as a crashing server does.
    cut: bool = False


def completion(
    content: str | None, *, finish_reason: str = "stop", refusal: str | None = None
) -> dict[str, Any]:
    """A chat-completions body with one choice."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if refusal is not None:
        message["refusal"] = refusal
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "model": "stub-coder",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }


def stream_reply(
    pieces: list[str], *, finish_reason: str | None = "stop", error: Any = None, done: bool = True
) -> Reply:
    """A streamed answer: one `data:` chunk per piece, then the finish reason, an error chunk, `[DONE]`."""
    chunks: list[Any] = [
        {
            "object": "chat.completion.chunk",
            "model": "stub-coder",
            "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
        }
        for piece in pieces
    ]
    if finish_reason is not None:
        chunks.append(
            {
                "object": "chat.completion.chunk",
                "model": "stub-coder",
                "choices": [{"index": 0, "delta": {}, "finish_reason": finish_reason}],
            }
        )
    if error is not None:
        chunks.append(error)
    events = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + (
        "data: [DONE]\n\n" if done else ""
    )
    return Reply(raw=events.encode(), content_type="text/event-stream")


def code_reply(code: str, lang: str = "python") -> Reply:
    """A reply with the code in a fenced block, with a line of prose around it."""
    return Reply(body=completion(f"Here is the program:\n```{lang}\n{code}```\nIt returns the result."))


class StubModel:
    """The server; use as a context manager. `base_url` ends in /v1."""

    def __init__(self) -> None:
        self.script: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.default_code = SUM_CODE
        self.code_by_keyword: dict[str, str] = {}
        self.suggestion = "keep"
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with stub.lock:
                    stub.requests.append(
                        {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
                    )
                    reply = stub.script.pop(0) if stub.script else stub.default_reply(body)
                if reply.hold is not None:
                    reply.hold.wait(HOLD_S)
                payload = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
                content_type = reply.content_type or (
                    "application/json" if reply.raw is None else "text/html"
                )
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", content_type)
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    if reply.cut:
                        self.send_header("Transfer-Encoding", "chunked")
                        self.send_header("Connection", "close")
                        self.end_headers()
                        half = payload[: len(payload) // 2]
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), half))
                        self.close_connection = True
                        return
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """The API root, as SLOTRELAY_MODEL_BASE_URL takes it."""
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def default_reply(self, body: dict[str, Any]) -> Reply:
        """Code for code requests, the configured word for suggestion requests."""
        system = body["messages"][0]["content"]
        if "Answer with exactly one word" in system:
            return Reply(body=completion(self.suggestion))
        code = next(
            (code for word, code in self.code_by_keyword.items() if word in body["messages"][-1]["content"]),
            self.default_code,
        )
        lang = "python"
        for candidate in ("node", "shell"):
            if f"self-contained {candidate} program" in system:
                lang = {"node": "javascript", "shell": "bash"}[candidate]
        return code_reply(code, lang)

    def code_requests(self) -> list[dict[str, Any]]:
        """The requests that asked for code (not for a suggestion)."""
        return [
            r
            for r in self.requests
            if "Answer with exactly one word" not in r["body"]["messages"][0]["content"]
        ]

    def reset(self) -> None:
        """Forget the script and the requests, back to the default replies."""
        with self.lock:
            self.script.clear()
            self.requests.clear()
            self.default_code = SUM_CODE
            self.code_by_keyword.clear()
            self.suggestion = "keep"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
