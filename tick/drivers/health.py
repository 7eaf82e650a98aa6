"""The loop's HTTP endpoints (SPEC §7.2): `/metrics`, `/healthz`, `/readyz`.

`/healthz` and `/readyz` answer from in-process state only, with no I/O, so
a slow database never makes the process look dead to its orchestrator.

The server is bounded: at most `MAX_CONNECTIONS` connections are served at
once, each connection has a socket timeout, and a peer that hangs up
mid-answer costs one warning event, never a traceback in the event stream.
Peers that hold their connections without finishing a request (silent, or a
byte now and then: the socket timeout is per read) must not keep the
kubelet's probe out, or the orchestrator restarts a healthy worker: a
connection open longer than `CONNECTION_SECS` is closed as the next one
arrives, and a connection that finds every slot taken closes the oldest.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tick.drivers.supervisor import Supervisor
from tick.events import EventSink, NullEvents

MAX_CONNECTIONS = 16
REQUEST_TIMEOUT_SECS = 5.0
# The most a connection may take, whatever it sends: the endpoints answer
# from memory in milliseconds, /metrics included.
CONNECTION_SECS = 10.0
# How long a new connection waits for the slot it freed by closing the oldest.
EVICTED_WAIT_SECS = 1.0
# An exchange with the database unanswered this long makes the loop unready
# (SPEC §7.2): awc's statements take milliseconds, so this is a server that
# stopped answering, long before the watchdog closes its connection.
STUCK_SECS = 10.0


class BoundedServer(ThreadingHTTPServer):
    """A threading HTTP server with a cap on concurrent connections and no
    tracebacks on stderr."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 events: EventSink) -> None:
        # An IPv6 address binds an IPv6 socket (`::` takes v4 too where the
        # host maps it); anything else, IPv4 (the server's default).
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._events = events
        # The connections being served and when each opened, oldest first.
        self._open: dict[int, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        self._close_overdue(time.monotonic() - CONNECTION_SECS)
        if not self._slots.acquire(blocking=False):
            self._close_overdue(None)  # at capacity: the oldest makes room
            if not self._slots.acquire(timeout=EVICTED_WAIT_SECS):
                self.shutdown_request(request)  # never queue a thread
                return
        with self._lock:
            self._open[id(request)] = (time.monotonic(), request)
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._served(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._served(request)

    def _served(self, request: Any) -> None:
        with self._lock:
            self._open.pop(id(request), None)
        self._slots.release()

    def _close_overdue(self, opened_before: float | None) -> None:
        """Shut down the connections opened before `opened_before` (None: the
        oldest one): their threads' reads end, and so do their requests."""
        with self._lock:
            found = [sock for opened, sock in self._open.values()
                     if opened_before is None or opened < opened_before]
        for sock in found[:1] if opened_before is None else found:
            with contextlib.suppress(OSError):  # already gone
                sock.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A scraper that hung up or timed out: one line, not a traceback.
        error = sys.exc_info()[1]
        self._events.log("warning", "metrics_request_failed",
                         error=type(error).__name__ if error else "unknown")


def make_server(
    address: str,
    port: int,
    supervisor: Supervisor,
    exposition: Callable[[], bytes],
    events: EventSink | None = None,
    troubles: Callable[[], list[str]] | None = None,
) -> BoundedServer:
    """A server for the three endpoints, bound but not yet serving; `OSError`
    if the address cannot be bound. `/readyz` answers 503 naming any dead
    part and any of `troubles()` (by default: this process's exchanges with
    the database unanswered for `STUCK_SECS`), all in-process state."""
    unready: Callable[[], list[str]] = troubles or database_troubles

    class Handler(BaseHTTPRequestHandler):
        timeout = REQUEST_TIMEOUT_SECS  # a socket timeout per connection
        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, exposition(), "text/plain; version=0.0.4; charset=utf-8")
            elif path == "/healthz":
                parts = {n: s.status for n, s in supervisor.parts.items()}
                self._json(200, {"status": "ok", "parts": parts})
            elif path == "/readyz":
                dead = supervisor.dead()
                database = unready()
                if dead or database:
                    body: dict[str, Any] = {"status": "unavailable"}
                    if dead:
                        body["dead"] = dead
                    if database:
                        body["database"] = database
                    self._json(503, body)
                else:
                    self._json(200, {"status": "ready"})
            else:
                self._json(404, {"error": "not found"})

        def _json(self, code: int, data: dict[str, Any]) -> None:
            self._send(code, json.dumps(data, sort_keys=True).encode() + b"\n",
                       "application/json")

        def log_message(self, format: str, *args: Any) -> None:
            pass  # scrapes every few seconds would drown the job events

    return BoundedServer((address, port), Handler, events or NullEvents())


def database_troubles(since: Callable[[], float | None] | None = None) -> list[str]:
    """Why the database keeps this process from working, from in-process
    state: exchanges unanswered for `STUCK_SECS`, and (given `since`, the
    instant a lost connection began to be retried) a database unreachable."""
    import time

    from tick.watchdog import stuck

    found = stuck(STUCK_SECS)
    lost = since() if since is not None else None
    if lost is not None:
        found.append(f"unreachable for {time.monotonic() - lost:.0f} s (reconnecting)")
    return found


def serve_until(server: ThreadingHTTPServer, stop: threading.Event) -> None:
    """Serve until `stop`; a supervised part."""
    thread = threading.Thread(target=server.serve_forever, name="awc-http", daemon=True)
    thread.start()
    try:
        stop.wait()
    finally:
        server.shutdown()
        server.server_close()
