"""A TCP proxy in front of the test server that can fall silent: its
sockets stay open, it accepts and reads, and it forwards nothing until
`answer()` (SPEC §3: a database that stops answering but keeps its socket
open). Real PostgreSQL behind it, real processes in front."""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any

from psycopg.conninfo import conninfo_to_dict, make_conninfo


class SilentProxy:
    """Forwards 127.0.0.1:`port` to the server `url` names (TCP or a Unix
    socket), until `fall_silent()`; `url_for(dbname)` goes through it."""

    def __init__(self, url: str) -> None:
        self._target = conninfo_to_dict(url)
        self._flowing = threading.Event()
        self._flowing.set()
        self._sockets: list[socket.socket] = []
        self._refusing = False
        self.accepted = 0  # connections forwarded, to count a client's reconnects
        self._dropping = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def url_for(self, url: str) -> str:
        """`url` (same user and database) through the proxy."""
        parts = {k: v for k, v in conninfo_to_dict(url).items() if k != "hostaddr"}
        return make_conninfo(**{**parts, "host": "127.0.0.1", "port": str(self.port)})

    def fall_silent(self) -> None:
        """Keep every socket open, forward nothing more (either way)."""
        self._flowing.clear()

    def answer(self) -> None:
        """Forward again, what was held first; accept connections again."""
        self._refusing = False
        self._flowing.set()

    def drop_next_answer(self) -> None:
        """The server's next answer on any connection is dropped and that
        connection closed: what the server did, the client never hears."""
        self._dropping.set()

    def cut(self) -> None:
        """Close every connection and every new one at once, until `answer()`
        (a database gone, not silent)."""
        self._refusing = True
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._flowing.set()
        for sock in [self._listener, *self._sockets]:
            with contextlib.suppress(OSError):
                sock.close()

    def _upstream(self) -> socket.socket:
        host = str(self._target.get("host") or "/var/run/postgresql")
        port = str(self._target.get("port") or "5432")
        if host.startswith("/"):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(f"{host}/.s.PGSQL.{port}")
            return sock
        return socket.create_connection((host, int(port)))

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._refusing:
                client.close()
                continue
            try:
                server = self._upstream()
            except OSError:
                client.close()
                continue
            self._sockets += [client, server]
            self.accepted += 1
            for src, dst, answers in ((client, server, False), (server, client, True)):
                threading.Thread(target=self._pump, args=(src, dst, answers),
                                 daemon=True).start()

    def _pump(self, src: Any, dst: Any, answers: bool) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if answers and data and self._dropping.is_set():
                self._dropping.clear()
                data = b""
            if not data:
                for sock in (src, dst):
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                return
            self._flowing.wait()  # silent: hold the bytes, keep the socket open
            try:
                dst.sendall(data)
            except OSError:
                return
