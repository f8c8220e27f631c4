"""A client for OpenAI-compatible `/v1/chat/completions` endpoints (Ollama, vLLM, llama.cpp server).

Configuration is plain data (`ModelSettings`): the flow builds it from a Prefect Block, the CLI from
the environment or a dotenv file (`SLOTRELAY_MODEL_BASE_URL` ending in /v1, `SLOTRELAY_MODEL_NAME`,
`SLOTRELAY_MODEL_API_KEY`, `SLOTRELAY_MODEL_TIMEOUT_S`, `SLOTRELAY_MODEL_MAX_TOKENS`; which file, and
what a root's `.env` may set: `slotrelay.pen.config`). Every failure of the
endpoint is translated here, at one boundary, into `CodeGenerationFailed` (MPP-E003): connection refused,
429/5xx after urllib3's retries, a read timeout, a refusal, an empty or malformed reply. The servers' error
bodies differ and all are read:

    OpenAI, vLLM >= 0.6, llama.cpp  {"error": {"message": ..., "type": ..., "code": ...}}
    Ollama                          {"error": "model 'x' not found"}
    vLLM before 0.6                 {"object": "error", "message": ..., "type": ..., "code": ...}
    FastAPI validation (vLLM 422)   {"detail": [...] | "..."}

The client asks for a plain JSON answer (`stream: false`), but some servers and proxies stream
anyway: a `text/event-stream` body is read chunk by chunk (`data: {...}` lines until `data: [DONE]`),
the deltas joined, and an error sent as a chunk mid-stream (`data: {"error": ...}`, as llama.cpp and
vLLM do) is MPP-E003 with its message, as is an error body sent with status 200.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import ReadTimeoutError
from urllib3.util.retry import Retry

from slotrelay.pen.errors import CodeGenerationFailed

ENV_PREFIX = "SLOTRELAY_MODEL_"
RETRY_STATUSES = (429, 500, 502, 503, 504)


@dataclass(frozen=True)
class ModelSettings:
    """Where the code model is and how long to wait for it.

    Parameters:
        base_url: the API root ending in `/v1` (e.g. `http://127.0.0.1:11434/v1` for Ollama).
        model: the model name the server knows.
        api_key: sent as a bearer token when set (kept out of `repr`).
        timeout_s: read timeout of one request, in seconds.
        max_retries: retries of connection errors and 429/5xx answers, with exponential backoff.
        max_tokens: the cap on a program's length in tokens: a model that never stops (small ones
            loop) is cut off there instead of filling its context window.
        sources: where each setting came from, by name ("environment", "env file ...", "CodeModel
            block ...", "default"; `slotrelay.pen.config`).
        ignored: variables a root's `.env` set that were not taken, and why.
    """

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 60.0
    max_retries: int = 2
    max_tokens: int = 1024
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    ignored: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class ChatReply:
    """The useful part of a chat-completions answer."""

    content: str
    finish_reason: str | None
    model: str | None


class ChatClient:
    """A synchronous chat-completions client with retries (urllib3 `Retry` on a requests session).

    Parameters:
        settings: the endpoint and its limits.
    """

    def __init__(self, settings: ModelSettings) -> None:
        self.settings = settings
        self.url = settings.base_url.rstrip("/") + "/chat/completions"
        retry = Retry(
            total=settings.max_retries,
            connect=settings.max_retries,
            # A read timeout is not retried: the model was slow once, it will be slow again.
            read=0,
            status=settings.max_retries,
            status_forcelist=RETRY_STATUSES,
            allowed_methods=None,
            backoff_factor=0.2,
            backoff_max=5,
            raise_on_status=False,
            respect_retry_after_header=True,
        )
        self.session = requests.Session()
        self.session.mount("http://", HTTPAdapter(max_retries=retry))
        self.session.mount("https://", HTTPAdapter(max_retries=retry))
        if settings.api_key:
            self.session.headers["Authorization"] = f"Bearer {settings.api_key}"

    def close(self) -> None:
        """Close the pooled connections."""
        self.session.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def complete(
        self, messages: list[dict[str, str]], *, temperature: float = 0.0, max_tokens: int | None = None
    ) -> ChatReply:
        """Send one chat-completions request and return the first choice.

        Parameters:
            messages: `[{"role": "system"|"user"|"assistant", "content": str}, ...]`.
            temperature: sampling temperature (0 for reproducible code).
            max_tokens: a cap on the reply's length (None: the settings' `max_tokens`).

        Returns:
            The reply's text, finish reason and the model that answered.

        Raises:
            CodeGenerationFailed: (MPP-E003) unreachable, timed out, an error status after retries,
                a refusal, or a reply without text; `details` carries the server's error.
        """
        body: dict[str, Any] = {
            "model": self.settings.model,
            "messages": messages,
            "temperature": temperature,
            "stream": False,
            "max_tokens": max_tokens or self.settings.max_tokens,
        }
        try:
            response = self.session.post(self.url, json=body, timeout=(5.0, self.settings.timeout_s))
        except requests.exceptions.RequestException as exc:
            if _is_timeout(exc):
                raise CodeGenerationFailed(
                    f"code model at {self.url} did not answer within {self.settings.timeout_s:g} s "
                    f"(raise {ENV_PREFIX}TIMEOUT_S for a slow model)",
                    details={"reason": "timeout"},
                ) from exc
            if isinstance(exc, requests.exceptions.ChunkedEncodingError):
                raise CodeGenerationFailed(
                    f"code model at {self.url} broke the connection in the middle of its reply: {exc}",
                    details={"reason": "broken_reply"},
                ) from exc
            raise CodeGenerationFailed(
                f"code model at {self.url} is unreachable: {_root_cause(exc)}",
                details={"reason": "unreachable"},
            ) from exc
        if response.status_code >= 400:
            message = describe_error_body(response)
            raise CodeGenerationFailed(
                f"code model at {self.url} answered HTTP {response.status_code}: {message}",
                details={"reason": "http_error", "status": response.status_code, "server_message": message},
            )
        return _parse_reply(response, self.url)


def describe_error_body(response: requests.Response) -> str:
    """The error message in a failed answer, whichever server shape it has.

    Parameters:
        response: an answer with a 4xx/5xx status.

    Returns:
        The server's message (with its type or code when given), or the start of a non-JSON body.
    """
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason or "no body"
    return describe_error(body)


def describe_error(body: Any) -> str:
    """The message in a parsed error body, whichever server shape it has (see the module docstring).

    Parameters:
        body: the parsed JSON of an error answer or of an error chunk in a stream.

    Returns:
        The server's message, with its type or code when given.
    """
    if not isinstance(body, dict):
        return str(body)[:300]
    error = body.get("error")
    if isinstance(error, dict):
        kind = error.get("type") or error.get("code")
        message = str(error.get("message") or error)
        return f"{message} ({kind})" if kind else message
    if isinstance(error, str):
        return error
    if body.get("object") == "error":
        kind = body.get("type")
        message = str(body.get("message") or body)
        return f"{message} ({kind})" if kind else message
    if "detail" in body:
        return str(body["detail"])[:300]
    return str(body)[:300]


def _server_error(body: Any, url: str) -> CodeGenerationFailed | None:
    # An error object where a completion (or a chunk of one) should be: the server failed mid-way.
    if not isinstance(body, dict) or "choices" in body:
        return None
    if "error" not in body and body.get("object") != "error":
        return None
    message = describe_error(body)
    return CodeGenerationFailed(
        f"code model at {url} answered with an error: {message}",
        details={"reason": "server_error", "server_message": message},
    )


def _event_stream(response: requests.Response, url: str) -> dict[str, Any]:
    """A streamed completion (server-sent events) joined into the shape of a non-streamed one."""
    content: list[str] = []
    finish_reason = refusal = model = None
    done = False
    for line in response.text.splitlines():
        if not line.startswith("data:"):
            continue
        data = line[len("data:") :].strip()
        if data == "[DONE]":
            done = True
            break
        try:
            chunk = json.loads(data)
        except ValueError as exc:
            raise CodeGenerationFailed(
                f"code model at {url} streamed a chunk that is not JSON: {data[:200]!r}",
                details={"reason": "malformed_reply"},
            ) from exc
        failure = _server_error(chunk, url)
        if failure is not None:
            raise failure
        model = chunk.get("model") or model
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or choice.get("message") or {}
            content.append(delta.get("content") or "")
            refusal = delta.get("refusal") or refusal
            finish_reason = choice.get("finish_reason") or finish_reason
    if not (done or finish_reason):
        raise CodeGenerationFailed(
            f"code model at {url} ended its stream before the reply finished (no finish_reason, no [DONE])",
            details={"reason": "truncated"},
        )
    message = {"role": "assistant", "content": "".join(content), "refusal": refusal}
    return {"model": model, "choices": [{"message": message, "finish_reason": finish_reason}]}


def _parse_reply(response: requests.Response, url: str) -> ChatReply:
    try:
        if response.headers.get("Content-Type", "").startswith("text/event-stream"):
            body = _event_stream(response, url)
        else:
            body = response.json()
        failure = _server_error(body, url)
        if failure is not None:
            raise failure
        choice = body["choices"][0]
        message = choice.get("message") or {}
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise CodeGenerationFailed(
            f"code model at {url} sent a reply that is not a chat completion: {response.text[:200]!r}",
            details={"reason": "malformed_reply"},
        ) from exc
    finish_reason = choice.get("finish_reason")
    refusal = message.get("refusal")
    if refusal or finish_reason == "content_filter":
        raise CodeGenerationFailed(
            f"code model refused: {refusal or 'content filtered'}",
            details={"reason": "refused", "finish_reason": finish_reason},
        )
    content = message.get("content")
    if isinstance(content, list):
        # Some servers send content parts: keep the text ones.
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    if not isinstance(content, str) or not content.strip():
        raise CodeGenerationFailed(
            f"code model at {url} replied with no text (finish_reason={finish_reason!r})",
            details={"reason": "empty_reply", "finish_reason": finish_reason},
        )
    return ChatReply(content=content, finish_reason=finish_reason, model=body.get("model"))


def _causes(exc: BaseException) -> list[BaseException]:
    # requests wraps urllib3's MaxRetryError (in args[0]), which holds the socket error in `reason`.
    chain: list[BaseException] = []
    pending: list[object] = [exc]
    while pending:
        item = pending.pop()
        if not isinstance(item, BaseException) or item in chain:
            continue
        chain.append(item)
        pending += [item.__cause__, item.__context__, getattr(item, "reason", None), *item.args[:1]]
    return chain


def _is_timeout(exc: BaseException) -> bool:
    return any(
        isinstance(cause, (ReadTimeoutError, requests.exceptions.ReadTimeout)) for cause in _causes(exc)
    )


def _root_cause(exc: BaseException) -> str:
    # requests wraps urllib3's MaxRetryError which wraps the socket error: name the innermost one.
    while exc.__cause__ is not None or exc.__context__ is not None:
        nxt = exc.__cause__ or exc.__context__
        if nxt is None:
            break
        exc = nxt
    reason = getattr(exc, "reason", None)
    return str(reason or exc)
