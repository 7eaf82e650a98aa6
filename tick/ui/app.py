"""The console's web application (SPEC §19): routes, rendering, errors.

Starlette serves server-rendered pages (Jinja2, autoescaped); the only
script is the vendored static/awc.js that pauses and resumes the live
refresh. Endpoints are plain functions, so Starlette runs them in its
thread pool and each borrows a pooled psycopg connection.

Every request passes `guard` first: a session or the login page, security
headers on every answer, a bounded body. A refused request never reaches a
query; a failed one answers a page with a status and one line, never a
traceback.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import Message, Receive, Scope, Send

from tick.ui.access import SESSION_COOKIE, Gate
from tick.ui.render import FILTERS

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

HERE = Path(__file__).resolve().parent
MAX_BODY = 64 * 1024  # every form the console has fits in far less
LOG = logging.getLogger("awc.ui")

HEADERS = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; form-action 'self'; base-uri 'none'; "
                               "frame-ancestors 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
    "cross-origin-opener-policy": "same-origin",
}


class Console:
    """One console: its pool, its gate and whether it may act."""

    def __init__(self, pool: ConnectionPool[Any], token: str, read_only: bool) -> None:
        self.pool = pool
        self.gate = Gate(token)
        self.read_only = read_only
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        self.templates.env.filters.update(FILTERS)

    def page(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        session = request.scope.get("awc.session")
        return self.templates.TemplateResponse(request, name, {
            "csrf": session.csrf if session else "", "read_only": self.read_only,
            "signed_in": session is not None, "path": request.url.path, **context},
            status_code=status)

    def problem(self, request: Request, status: int, message: str) -> Response:
        return self.page(request, "problem.html", status, status_code=status, message=message)


def build_app(pool: ConnectionPool[Any], token: str, read_only: bool) -> Guard:
    """The console's ASGI app over `pool`; the caller opens and closes it."""
    console = Console(pool, token, read_only)
    from tick.ui import pages

    routes = [
        Route("/login", pages.login_form, methods=["GET"]),
        Route("/login", pages.login, methods=["POST"]),
        Route("/logout", pages.logout, methods=["POST"]),
        Route("/", pages.overview),
        Route("/jobs", pages.jobs),
        Route("/jobs/bulk", pages.bulk_preview, methods=["GET"]),
        Route("/jobs/bulk", pages.bulk_apply, methods=["POST"]),
        Route("/jobs/{id}", pages.job),
        Route("/jobs/{id}/{action:str}", pages.job_action, methods=["POST"]),
        Route("/schedules", pages.schedules),
        Route("/schedules/{name:path}/{action:str}", pages.schedule_action, methods=["POST"]),
        Route("/schedules/{name:path}", pages.schedule),
        Route("/ticks", pages.ticks),
        Route("/limits", pages.limits),
        Route("/favicon.ico", lambda r: RedirectResponse("/static/favicon.svg", 301)),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={
        400: lambda r, e: console.problem(r, 400, "awc: the request's form could not be read"),
        404: lambda r, e: console.problem(r, 404, "awc: no such page"),
        405: lambda r, e: console.problem(r, 405, "awc: that method is not allowed here"),
        500: lambda r, e: _internal(console, r, e),
    })
    app.state.console = console
    return Guard(app, console)


def _internal(console: Console, request: Request, error: Exception) -> Response:
    # The class only: a message may quote a payload or a connection string.
    LOG.error("awc ui: %s %s failed: %s", request.method, request.url.path,
              type(error).__name__)
    return console.problem(request, 500, "awc: the console could not answer this request")


OPEN_PATHS = ("/login", "/static/", "/favicon.ico")


class Guard:
    """ASGI middleware: security headers, a bounded body, and a session for
    everything but the login page and static files."""

    def __init__(self, app: Starlette, console: Console) -> None:
        self.app = app
        self.console = console

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", [])
                           if k.decode("latin-1").lower() not in HEADERS]
                headers += [(k.encode(), v.encode()) for k, v in HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        request = Request(scope)
        length = request.headers.get("content-length", "0")
        if not length.isdigit() or int(length) > MAX_BODY:
            await self.console.problem(request, 413, "awc: request body too large")(
                scope, receive, send_with_headers)
            return
        path = scope.get("path", "")
        session = self.console.gate.session(request.cookies.get(SESSION_COOKIE))
        scope["awc.session"] = session
        if session is None and not path.startswith(OPEN_PATHS):
            if scope.get("method") in ("GET", "HEAD"):
                target = "/login?next=" + quote(path, safe="/")
                response: Response = RedirectResponse(target, status_code=303)
            else:
                response = self.console.problem(request, 403, "awc: sign in first")
            await response(scope, receive, send_with_headers)
            return
        await self.app(scope, _bounded(receive), send_with_headers)


def _bounded(receive: Receive) -> Receive:
    """`receive` that stops a chunked body past MAX_BODY (no length header)."""
    seen = 0

    async def wrapped() -> Message:
        nonlocal seen
        message = await receive()
        if message.get("type") == "http.request":
            seen += len(message.get("body", b""))
            if seen > MAX_BODY:
                return {"type": "http.disconnect"}
        return message

    return wrapped
