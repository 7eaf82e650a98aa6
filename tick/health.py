"""The loop's HTTP endpoints (SPEC §7.2): `/metrics`, `/healthz`, `/readyz`.

`/healthz` and `/readyz` answer from in-process state only, with no I/O, so
a slow database never makes the process look dead to its orchestrator.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tick.supervisor import Supervisor


def make_server(
    address: str, port: int, supervisor: Supervisor, exposition: Callable[[], bytes]
) -> ThreadingHTTPServer:
    """A server for the three endpoints, bound but not yet serving."""

    class Handler(BaseHTTPRequestHandler):
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
                if dead:
                    self._json(503, {"status": "unavailable", "dead": dead})
                else:
                    self._json(200, {"status": "ready"})
            else:
                self._json(404, {"error": "not found"})

        def _json(self, code: int, data: dict[str, Any]) -> None:
            self._send(code, json.dumps(data, sort_keys=True).encode() + b"\n",
                       "application/json")

        def log_message(self, format: str, *args: Any) -> None:
            pass  # scrapes every few seconds would drown the job events

    server = ThreadingHTTPServer((address, port), Handler)
    server.daemon_threads = True
    return server


def serve_until(server: ThreadingHTTPServer, stop: threading.Event) -> None:
    """Serve until `stop`; a supervised part."""
    thread = threading.Thread(target=server.serve_forever, name="awc-http", daemon=True)
    thread.start()
    try:
        stop.wait()
    finally:
        server.shutdown()
        server.server_close()
