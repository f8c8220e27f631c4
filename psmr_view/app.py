"""The Starlette application: routes to the pages, one page at a time, refusals as HTML pages.

    /                         the store's workspaces (or the default workspace's overview)
    /ws/{id}/                 overview          /ws/{id}/search    search
    /ws/{id}/symbol?id=       symbol slice      /ws/{id}/evidence  evidence of an edge
    /ws/{id}/neighbours?id=   a slice's nodes, nearest first (the list behind its picture)
    /ws/{id}/impact?id=       impact            /ws/{id}/unknowns  unknowns
    /ws/{id}/conflicts        conflicts         /ws/{id}/findings  findings
    /ws/{id}/diff             semantic diff     /ws/{id}/source    a file's lines
    /ws/{id}/deltas           proposed deltas   /ws/{id}/delta?id= one delta (read-only: nothing applies)
    POST /ws/{id}/diff        build two git revisions, then 303 to their diff (the one change to the store)

Every GET only reads. The one request that changes the store, building two revisions' workspaces
(a git worktree each) for a diff, is a POST that the guard takes only from the view's own pages
(`psmr_view.guard`); it answers with a redirect to the diff page, so a reload never builds again.

Pages are built side by side, each in its own worker thread, and no lock is held while a page reads
the store or the tree: a page whose read is slow or refused answers alone, and the next page does not
wait for it (the core guards its own caches' tables). Every refusal, the view's or an operator's, is
an HTML page with a 4xx status; a fault of the view itself is logged with its traceback and shown as
a 500 page with an incident id.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp

from psmr_view import pages
from psmr_view.errors import ViewError
from psmr_view.guard import LoopbackGuard
from psmr_view.links import Links
from psmr_view.paging import PageRef, first_page_url
from psmr_view.reader import WorkspaceReader

logger = logging.getLogger(__name__)
HERE = Path(__file__).parent
TEMPLATES = Jinja2Templates(
    env=Environment(loader=PackageLoader("psmr_view", "templates"), autoescape=select_autoescape(["html"]))
)
HTTP_REASONS = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}
WORKSPACE_PATH = re.compile(r"/ws/(ws_[0-9a-f]+)/")
FORM_TYPE = "application/x-www-form-urlencoded"
MAX_FORM_BYTES = 4096


def error_page(request: Request | None, error: ViewError, header: dict[str, Any] | None = None) -> Response:
    """A refusal as an HTML page with its status; `header` gives it the navigation of a workspace."""
    context = {"error": error, "title": f"{error.status} {error.code}", **(header or {})}
    if request is None:
        template = TEMPLATES.get_template("error.html")
        return Response(template.render(**context), status_code=error.status, media_type="text/html")
    return TEMPLATES.TemplateResponse(request, "error.html", context, status_code=error.status)


def _refusal(status: int, code: str, message: str) -> ASGIApp:
    return error_page(None, ViewError(code, message, status=status))


async def _form(request: Request) -> dict[str, str]:
    """The fields of a form the view's own page posted (application/x-www-form-urlencoded, a few
    short fields): a larger or other body is refused before it is read whole.

    Raises:
        ViewError: INVALID_QUERY (415, 413) for another content type or a body over MAX_FORM_BYTES.
    """
    if request.headers.get("content-type", "").split(";")[0].strip() != FORM_TYPE:
        raise ViewError("INVALID_QUERY", f"the form must be sent as {FORM_TYPE}", status=415)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise ViewError("INVALID_QUERY", f"the form is larger than {MAX_FORM_BYTES} bytes", status=413)
    return dict(parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True))


def create_app(store: Path, *, hosts: Iterable[str], workspace_id: str | None = None) -> Starlette:
    """The view over a store.

    Parameters:
        store: the PSMR store folder.
        hosts: the Host header values to answer (see `slotrelay.loopback.loopback_hosts`).
        workspace_id: the workspace `/` opens; None lists the store's workspaces there.

    Returns:
        The ASGI application.
    """
    store = Path(store).expanduser().resolve()

    def header(request: Request) -> dict[str, Any]:
        """The navigation of the workspace a refused request was about (its path's, else the one `/`
        opens), when that workspace can be read; none otherwise."""
        named = WORKSPACE_PATH.match(request.url.path)
        about = named[1] if named else workspace_id
        if about is None:
            return {}
        try:
            reader = WorkspaceReader(store, about)
        except ViewError:
            return {}
        return {"ws": reader.summary(), "links": Links(about)}

    def render(request: Request, built: pages.Page, reader: WorkspaceReader | None = None) -> Response:
        template, context = built
        if reader is not None:
            context |= {"ws": reader.summary(), "links": Links(reader.workspace_id)}
        return TEMPLATES.TemplateResponse(request, template, context)

    def on_workspace(build: Callable[[pages.PageRequest], pages.Page]) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            reader = WorkspaceReader(store, request.path_params["workspace_id"])
            page = PageRef.parse(request.query_params)
            req = pages.PageRequest(reader, request.query_params, page, request.url.path)
            page.check_version(reader.version, first_page_url(request.url.path, request.query_params))
            built = build(req)
            reader.check_unchanged()
            return render(request, built, reader)

        return endpoint

    def home(request: Request) -> Response:
        if workspace_id is not None:
            return RedirectResponse(Links(workspace_id).overview(), status_code=303)
        return list_all(request)

    def list_all(request: Request) -> Response:
        return render(request, pages.workspaces(store))

    async def compare_revisions(request: Request) -> Response:
        form = await _form(request)

        def build() -> str:
            # Not under a lock the pages wait on: building two revisions takes seconds, and the core
            # serialises the builds of one workspace itself (slotrelay/psmr/workspace/build.py).
            reader = WorkspaceReader(store, request.path_params["workspace_id"])
            return pages.compare_revisions(reader, form)

        return RedirectResponse(await run_in_threadpool(build), status_code=303)

    async def view_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ViewError)
        return error_page(request, exc, await run_in_threadpool(header, request))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        message = "no such page; start from the overview" if exc.status_code == 404 else str(exc.detail)
        return error_page(
            request,
            ViewError(
                HTTP_REASONS.get(exc.status_code, "BAD_REQUEST"),
                message,
                status=exc.status_code,
                links=[("the workspaces", "/workspaces")],
            ),
            await run_in_threadpool(header, request),
        )

    async def fault(request: Request, exc: Exception) -> Response:
        incident = f"view_{uuid.uuid4().hex[:12]}"
        logger.error("page %s failed (incident %s)", request.url.path, incident, exc_info=exc)
        return error_page(
            request,
            ViewError(
                "EXECUTION_FAILED",
                f"this page failed with an internal error (incident {incident}, logged as psmr_view)",
                status=500,
            ),
            await run_in_threadpool(header, request),
        )

    routes = [
        Route("/", home),
        Route("/workspaces", list_all),
        Route("/ws/{workspace_id}/", on_workspace(pages.overview)),
        *(
            Route(f"/ws/{{workspace_id}}/{name}", on_workspace(getattr(pages, name)))
            for name in (
                "search",
                "symbol",
                "neighbours",
                "evidence",
                "source",
                "impact",
                "unknowns",
                "conflicts",
                "findings",
                "diff",
                "deltas",
                "delta",
            )
        ),
        Route("/ws/{workspace_id}/diff", compare_revisions, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    exception_handlers: dict[Any, Any] = {ViewError: view_error, HTTPException: http_error, Exception: fault}
    return Starlette(
        routes=routes,
        middleware=[Middleware(LoopbackGuard, hosts=hosts, refuse=_refusal)],
        exception_handlers=exception_handlers,
    )
