"""Which failures are the network's: the seed's `external_unreachable`, recognised where an executor's
failure leaves it (`executors.run_executor`).

"中文区特殊类型：external_unreachable——标记为 skip，不重试。原因是我们在的地方，某些外部 API 本身就可能不通。
引擎不应把网络约束当成可修复的错误。" (external_unreachable is marked skip, not retried: where we are, some
outside APIs simply cannot be reached; the engine must not treat a network constraint as an error to
repair.) A node's own code rarely says so: it raises whatever its HTTP library raises. A failure is the
network's when, anywhere in its chain of causes (`__cause__`, `__context__`, and the `reason` urllib and
urllib3 keep):

- a connection was refused (`ConnectionRefusedError`);
- a name did not resolve (`socket.gaierror`, `socket.herror`);
- there is no route (`OSError` with ENETUNREACH, EHOSTUNREACH, ENETDOWN or EHOSTDOWN), or the kernel
  gave up connecting (ETIMEDOUT);
- a connect timed out: urllib3's `ConnectTimeoutError` (requests), httpx's `ConnectTimeout`, or urllib's
  `URLError` whose reason is a timeout (urllib raises a timeout while reading unwrapped, so that one is
  not the network's: the host was reached).

Anything else, a bare `TimeoutError` included, stays of no declared type (L5: a person decides).
"""

from __future__ import annotations

import errno
import socket
from urllib.error import URLError

from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

NO_ROUTE = frozenset(
    {errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN, errno.EHOSTDOWN, errno.ETIMEDOUT})
# The deepest causes Python's own libraries and urllib3 (requests) give; httpx's is matched by name below,
# as it is not a dependency of the engine.
CONNECT_TIMEOUTS: tuple[type[BaseException], ...] = (ConnectTimeoutError,)
HTTPX_CONNECT_TIMEOUT = ("httpx", "ConnectTimeout")
MAX_DEPTH = 20


def _causes(failure: BaseException) -> list[BaseException]:
    """The failure and what it wraps, outermost first (each once; a cycle or a long chain is cut)."""
    seen: list[BaseException] = []
    pending: list[BaseException | None] = [failure]
    while pending and len(seen) < MAX_DEPTH:
        current = pending.pop(0)
        if current is None or any(current is known for known in seen):
            continue
        seen.append(current)
        reason = getattr(current, "reason", None)
        pending += [current.__cause__, current.__context__,
                    reason if isinstance(reason, BaseException) else None]
    return seen


def _is_httpx_connect_timeout(failure: BaseException) -> bool:
    kind = type(failure)
    return (kind.__module__.split(".")[0], kind.__name__) == HTTPX_CONNECT_TIMEOUT


def unreachable_reason(failure: BaseException) -> str | None:
    """Why `failure` is the network's (a few words), or None when it is not (see the module docstring)."""
    # The deepest cause first: it is the most specific (requests' refused connection is a urllib3
    # NewConnectionError, which urllib3 derives from its ConnectTimeoutError, around the OSError).
    for cause in reversed(_causes(failure)):
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, socket.gaierror | socket.herror):
            return "name not resolved"
        if (isinstance(cause, CONNECT_TIMEOUTS) and not isinstance(cause, NewConnectionError)
                or _is_httpx_connect_timeout(cause)):
            return "connect timed out"
        if isinstance(cause, URLError) and isinstance(cause.reason, TimeoutError):
            return "connect timed out"
        if isinstance(cause, OSError) and cause.errno in NO_ROUTE:
            return "connect timed out" if cause.errno == errno.ETIMEDOUT else "no route to the host"
    return None
