"""How the console holds connections (SPEC §19): none for ever.

uvicorn waits for a request's headers and body as long as a client takes,
and keeps a connection that never sends a byte open until the client
leaves, so a few hundred silent or half-sent connections locked operators
out. The console's protocol (uvicorn's h11 one, bounded) holds each
connection only so long:

- headers: within `HEADER_SECS` of the connection opening, or of the first
  byte of a request on a kept-alive one; else a 408 and the connection
  closes (a connection that sent nothing just closes);
- body: within `BODY_SECS` of the headers (tick.ui.app reads it whole and
  answers a 408 page);
- idle between requests: `KEEP_ALIVE_SECS` (uvicorn's keep-alive timeout);
- an answer the client does not read: `ANSWER_SECS` after its request
  arrived, then the connection closes;
- at most `MAX_CONNECTIONS` at once. A connection past that closes the
  oldest one whose client has not sent a whole request (silent, half-sent
  or idle), so a flood of those never keeps an operator out; only when
  every connection is being answered does the new one get a 503.

Each 408, 503 or unreadable request is one `console_error` event.
"""

from __future__ import annotations

import asyncio
import html
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from tick.ui.app import HEADERS

if TYPE_CHECKING:
    from uvicorn.config import Config
    from uvicorn.server import ServerState

    from tick.events import EventSink

HEADER_SECS = 10.0
KEEP_ALIVE_SECS = 5
# Past the body's bound and the database's statement timeout (60 s, tick.db).
ANSWER_SECS = 90.0
MAX_CONNECTIONS = 128


def bounded_protocol(events: EventSink) -> type[asyncio.Protocol]:
    """The protocol class for `uvicorn.Config(http=...)`, reporting to `events`."""

    class Bounded(BoundedH11Protocol):
        sink = events

    return Bounded


def _refusal(status: int, message: str) -> bytes:
    """A whole HTTP answer: a small page with the console's headers, then close."""
    phrase = HTTPStatus(status).phrase
    body = (f'<!doctype html><html lang="en"><meta charset="utf-8"><title>{status}</title>'
            f'<section class="problem"><h1>{status}</h1>'
            f'<p class="error">{html.escape(message)}</p></section></html>').encode()
    head = [f"HTTP/1.1 {status} {phrase}", "content-type: text/html; charset=utf-8",
            f"content-length: {len(body)}", "connection: close",
            *(f"{name}: {value}" for name, value in HEADERS.items())]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with every wait bounded (see the module)."""

    sink: EventSink | None = None

    def __init__(self, config: Config, server_state: ServerState, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.opened = 0.0
        self.headers_timer: asyncio.TimerHandle | None = None
        self.answer_timer: asyncio.TimerHandle | None = None

    # -- uvicorn's hooks --------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.opened = self.loop.time()
        if len(self.connections) > MAX_CONNECTIONS and not self._evict_one():
            self._refuse(503, "awc: the console has too many connections; try again")
            return
        # A connection that never sends a byte: uvicorn arms no timer for it.
        self.headers_timer = self.loop.call_later(HEADER_SECS, self._headers_late)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        self._cancel_answer()
        super().on_response_complete()
        self._watch()  # a pipelined request may be in already

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_headers()
        self._cancel_answer()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        self._refuse(400, "awc: the request could not be read as HTTP")

    # -- the bounds ----------------------------------------------------------------------

    def _watch(self) -> None:
        if self.transport.is_closing():
            return
        if self.conn.their_state is h11.IDLE:
            # Part of a request's headers, or none yet: they have HEADER_SECS
            # from their first byte (an idle connection has uvicorn's
            # keep-alive timer until then).
            if self.headers_timer is None and self.conn.trailing_data[0]:
                self.headers_timer = self.loop.call_later(HEADER_SECS, self._headers_late)
            return
        self._cancel_headers()
        if self.answer_timer is None and self.conn.our_state is not h11.DONE:
            self.answer_timer = self.loop.call_later(ANSWER_SECS, self._answer_late)

    def _headers_late(self) -> None:
        self.headers_timer = None
        if self.conn.their_state is not h11.IDLE or self.transport.is_closing():
            return
        if not self.conn.trailing_data[0]:
            # Not a byte: closed quietly, as an idle keep-alive is; a
            # browser's preconnected socket is simply opened again.
            self.transport.close()
            return
        self._refuse(408, f"awc: the request did not arrive within {HEADER_SECS:.0f} s")

    def _answer_late(self) -> None:
        # The client does not read its answer: nothing more can be sent.
        self.answer_timer = None
        self.transport.close()

    def _evictable(self) -> bool:
        # The client has not sent a whole request: nothing is being answered.
        return (self.conn.their_state in (h11.IDLE, h11.SEND_BODY)
                and not self.transport.is_closing())

    def _evict_one(self) -> bool:
        """Close the oldest connection that holds no request being answered."""
        waiting = [c for c in self.connections
                   if c is not self and isinstance(c, BoundedH11Protocol) and c._evictable()]
        if not waiting:
            return False
        min(waiting, key=lambda c: c.opened).transport.close()
        return True

    def _refuse(self, status: int, message: str) -> None:
        self._cancel_headers()
        if self.sink is not None:
            self.sink.log("warning", "console_error", status=status, method="", path="")
        self.transport.write(_refusal(status, message))
        self.transport.close()

    def _cancel_headers(self) -> None:
        if self.headers_timer is not None:
            self.headers_timer.cancel()
            self.headers_timer = None

    def _cancel_answer(self) -> None:
        if self.answer_timer is not None:
            self.answer_timer.cancel()
            self.answer_timer = None
