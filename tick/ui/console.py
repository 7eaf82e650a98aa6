"""The console's state (SPEC §19): its pool, its gate, its templates and the
one error event each failed request writes. Every endpoint receives it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates
from starlette.types import Scope

from tick.bulk import ACTION_STATES
from tick.events import EventSink, StreamEvents
from tick.text import clip
from tick.ui.access import Gate
from tick.ui.filters import notice
from tick.ui.render import FILTERS
from tick.words import ACTION_DONE, DRIVERS, JOB_STATES, UNRUN_FIRES

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

HERE = Path(__file__).resolve().parent
REPORTED = "awc.reported"  # the scope key saying this request's error event is written
# The shared words the templates spell (tick/words.py), under these names.
WORDS: dict[str, Any] = {
    "job_states": JOB_STATES,
    "drivers": DRIVERS,
    "action_states": ACTION_STATES,
    "action_done": ACTION_DONE,
    "unrun_fires": UNRUN_FIRES,
}


class Console:
    """One console: its pool, its gate and whether it may act."""

    def __init__(
        self,
        pool: ConnectionPool[Any],
        token: str,
        read_only: bool,
        events: EventSink | None = None,
    ) -> None:
        self.pool = pool
        self.gate = Gate(token)
        self.read_only = read_only
        self.events = events if events is not None else StreamEvents()
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        self.templates.env.filters.update(FILTERS)
        self.templates.env.globals.update(WORDS)

    def page(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        session = request.scope.get("awc.session")
        return self.templates.TemplateResponse(
            request,
            name,
            {
                "csrf": session.csrf if session else "",
                "read_only": self.read_only,
                "signed_in": session is not None,
                "path": request.url.path,
                "notice": notice(request.query_params, request.url.path),
                **context,
            },
            status_code=status,
        )

    def problem(
        self, request: Request, status: int, message: str, error: str | None = None
    ) -> Response:
        """The error page every refusal and failure answers, and its one event."""
        self.report(request.scope, status, error)
        return self.page(request, "problem.html", status, status_code=status, message=message)

    def report(self, scope: Scope, status: int, error: str | None = None) -> None:
        """One `console_error` event per failed request (SPEC §3): its status,
        method and path, and for a 500 the exception's class only, since a
        message may quote a payload or a connection string."""
        reported = scope.get(REPORTED)
        if reported is not None:
            if reported:
                return
            reported.append(True)  # the list is shared by copies of the scope
        fields: dict[str, Any] = {
            "status": status,
            "method": scope.get("method", ""),
            "path": clip(scope.get("path", ""), 200),
        }
        if error is not None:
            fields["error"] = error
        self.events.log("error" if status >= 500 else "warning", "console_error", **fields)
