"""Loopback only: the view binds 127.0.0.1 (or ::1), and answers only requests meant for that address.

The view has no authentication, so it refuses to bind anything but a loopback address. A page on
another site can still make a browser send requests to 127.0.0.1 by resolving its own name there
(DNS rebinding); such a request carries that site's name in its Host header, so every request
whose Host is not this server's loopback address and port is refused with 421 before any page is
read. A sub-resource request from another site (an image or a fetch pointing here) is refused with
403: only a person navigating may reach a page from elsewhere. A request that may change the store
(any method but GET and HEAD: the view's one is building two git revisions for a diff) is taken only
from the view's own pages: its Origin, or without one its Referer, must be this server's address, else
403. A page on another site can make a browser navigate here, even submit a form here, but it cannot
make the browser send this server's own Origin; and a GET never changes anything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

# The methods that never change state here; any other one needs this server's own Origin.
SAFE_METHODS = frozenset({"GET", "HEAD"})


class LoopbackGuard:
    """ASGI middleware refusing requests for another host, cross-site sub-resource requests, and
    requests that may change state from anywhere but the view's own pages.

    Parameters:
        app: the application to guard.
        hosts: the Host header values accepted (see `slotrelay.loopback.loopback_hosts`).
        refuse: renders a refusal as `(status, code, message) -> ASGI app`.
    """

    def __init__(
        self, app: ASGIApp, *, hosts: Iterable[str], refuse: Callable[[int, str, str], ASGIApp]
    ) -> None:
        self.app = app
        self.hosts = frozenset(h.lower() for h in hosts)
        self.refuse = refuse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "").lower()
        if host not in self.hosts:
            refusal = self.refuse(
                421,
                "MISDIRECTED_REQUEST",
                f"this PSMR view answers only for {', '.join(sorted(self.hosts))}, not Host "
                f"{host or '(none)'}",
            )
            await refusal(scope, receive, send)
            return
        if headers.get("sec-fetch-site") == "cross-site" and headers.get("sec-fetch-mode") != "navigate":
            refusal = self.refuse(
                403, "CROSS_SITE_REFUSED", "another site's page may link here, not load this page into itself"
            )
            await refusal(scope, receive, send)
            return
        if scope["method"] not in SAFE_METHODS and not self._from_this_view(headers):
            refusal = self.refuse(
                403,
                "CROSS_SITE_REFUSED",
                f"a {scope['method']} changes the store and is taken only from this view's own pages (its "
                "Origin or Referer must be this address); open the page here and use its button",
            )
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _from_this_view(self, headers: dict[str, str]) -> bool:
        """Whether the request's Origin (else its Referer) is this server's own address."""
        origin = headers.get("origin")
        if origin is None:
            referer = urlsplit(headers.get("referer", ""))
            origin = f"{referer.scheme}://{referer.netloc}" if referer.netloc else ""
        scheme, _, netloc = origin.lower().partition("://")
        return scheme == "http" and netloc in self.hosts
