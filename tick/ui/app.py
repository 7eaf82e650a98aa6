"""The console's web application (SPEC §19): routes, rendering, errors.

Starlette serves server-rendered pages (Jinja2, autoescaped); the only
script is the vendored static/awc.js that pauses and resumes the live
refresh. Endpoints are plain functions, so Starlette runs them in its
thread pool and each borrows a pooled psycopg connection.

Every request passes `guard` first: a session or the login page, security
headers on every answer, a body read whole before any endpoint sees it
(bounded in size and in time). A refused request never reaches a query; a
failed one answers a page with a status and one line, and the console logs
exactly one event for it (`console_error`, JSON with `AWC_LOG_FORMAT=json`),
never a traceback.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Message, Receive, Scope, Send

from tick.events import EventSink
from tick.ui.access import SESSION_COOKIE
from tick.ui.console import HERE, REPORTED, Console

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

MAX_BODY = 64 * 1024  # every form the console has fits in far less
# A body (its headers arrived) must arrive whole within this: a client
# dripping it must not hold a connection (tick/ui/serve.py bounds the rest).
BODY_SECS = 10.0

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


def build_app(pool: ConnectionPool[Any], token: str, read_only: bool,
              events: EventSink | None = None) -> Guard:
    """The console's ASGI app over `pool`; the caller opens and closes it.
    Errors are logged to `events` (JSON lines on stderr by default)."""
    console = Console(pool, token, read_only, events)
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
        Route("/limits/{action:str}", pages.limit_action, methods=["POST"]),
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
    # Starlette re-raises the error once this page is sent; Guard swallows
    # it, so uvicorn never logs its traceback.
    return console.problem(request, 500, "awc: the console could not answer this request",
                           type(error).__name__)


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
        scope[REPORTED] = []
        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = [(k, v) for k, v in message.get("headers", [])
                           if k.decode("latin-1").lower() not in HEADERS]
                headers += [(k.encode(), v.encode()) for k, v in HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self._guarded(scope, receive, send_with_headers)
        except Exception as error:  # any failure: one event and a page, never a traceback
            self.console.report(scope, 500, type(error).__name__)
            if not started:
                message = "awc: the console could not answer this request"
                try:
                    response = self.console.problem(Request(scope), 500, message)
                except Exception:  # the error page itself failed: the bare line
                    response = PlainTextResponse(message, 500)
                await response(scope, receive, send_with_headers)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        length = request.headers.get("content-length", "0")
        if not length.isdigit() or int(length) > MAX_BODY:
            await _closing(self.console.problem(request, 413, "awc: request body too large"))(
                scope, receive, send)
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
            await response(scope, receive, send)
            return
        body = await _read_body(receive)
        if body is None:
            return  # the client left: no one to answer
        if isinstance(body, int):
            message = ("awc: request body too large" if body == 413 else
                       f"awc: the request body did not arrive within {BODY_SECS:.0f} s")
            await _closing(self.console.problem(request, body, message))(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)


def _closing(response: Response) -> Response:
    # The rest of a refused body is never read: the connection cannot be reused.
    response.headers["connection"] = "close"
    return response


async def _read_body(receive: Receive) -> bytes | int | None:
    """The whole request body; or 413 past MAX_BODY (a chunked body has no
    length to check first), 408 when it does not arrive within BODY_SECS,
    None when the client disconnected."""
    chunks: list[bytes] = []
    seen = 0
    try:
        async with asyncio.timeout(BODY_SECS):
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return None
                chunk = message.get("body", b"")
                seen += len(chunk)
                if seen > MAX_BODY:
                    return 413
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)
    except TimeoutError:
        return 408


def _replay(body: bytes, receive: Receive) -> Receive:
    """`receive` for the app: the body read, then the connection's own
    messages (a disconnect)."""
    given = False

    async def replayed() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
