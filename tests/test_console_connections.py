"""The console's connections are bounded (SPEC §19): a client that sends
nothing, half its headers or half its body, or idles between requests,
loses its connection in bounded time, and a flood of such connections never
keeps an operator out. A real `awc ui` process and raw sockets."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.support import (
    CONSOLE_TOKEN,
    ROOT,
    awc_command,
    read_stderr,
    signed_in,
    start_console,
    stop,
    wait_for,
)
from tick.ui.app import BODY_SECS
from tick.ui.serve import HEADER_SECS, KEEP_ALIVE_SECS, MAX_CONNECTIONS

pytestmark = pytest.mark.timeout(120)
SLACK = 5.0  # a loaded CI machine


@pytest.fixture
def console(awc_env: dict[str, str]) -> Iterator[tuple[str, list[str]]]:
    proc, base = start_console({**awc_env, "AWC_LOG_FORMAT": "json"})
    lines = read_stderr(proc)
    yield base, lines
    stop(proc)


def _open(base: str, first: bytes = b"") -> socket.socket:
    parts = urlsplit(base)
    sock = socket.create_connection((parts.hostname or "", parts.port or 80), timeout=5)
    if first:
        sock.sendall(first)
    return sock


def _until_closed(sock: socket.socket, deadline: float) -> bytes:
    """What the console sent before closing the connection; fails when it is
    still open at `deadline` (monotonic)."""
    got = b""
    with sock:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"the connection is still open; it sent {got[:80]!r}")
            sock.settimeout(left)
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            except ConnectionResetError:
                return got
            if not chunk:
                return got
            got += chunk


HALF_HEADERS = b"GET / HTTP/1.1\r\nHost: console\r\nX-Slow: "
HALF_BODY = (b"POST /login HTTP/1.1\r\nHost: console\r\n"
             b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\n"
             b"token=")


def test_silent_and_half_sent_connections_are_closed_in_bounded_time(
        console: tuple[str, list[str]]) -> None:
    base, lines = console
    began = time.monotonic()
    silent = [_open(base) for _ in range(10)]
    half_headers = [_open(base, HALF_HEADERS) for _ in range(10)]
    half_body = [_open(base, HALF_BODY) for _ in range(5)]
    for sock in silent:
        assert _until_closed(sock, began + HEADER_SECS + SLACK) == b""
    for sock in half_headers:
        answer = _until_closed(sock, began + HEADER_SECS + SLACK)
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:80]
        assert b"content-security-policy:" in answer
    for sock in half_body:
        answer = _until_closed(sock, began + BODY_SECS + SLACK)
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:80]
        assert b"did not arrive within" in answer
    # A kept-alive connection that goes quiet after its answer is closed too.
    idle = _open(base, b"GET /login HTTP/1.1\r\nHost: console\r\n\r\n")
    answered = time.monotonic()
    assert _until_closed(idle, answered + KEEP_ALIVE_SECS + SLACK).startswith(b"HTTP/1.1 200 ")
    assert all(line.startswith("{") for line in lines), lines


def test_a_request_that_is_not_http_gets_a_400_page_and_one_event(
        console: tuple[str, list[str]]) -> None:
    base, lines = console
    answer = _until_closed(_open(base, b"NOT HTTP AT ALL\r\n\r\n"), time.monotonic() + SLACK)
    assert answer.startswith(b"HTTP/1.1 400 ") and b'class="problem"' in answer
    wait_for(lambda: any('"console_error"' in line for line in lines), timeout=SLACK,
             what="the console_error event")
    time.sleep(0.2)  # not synchronisation: room for a wrong extra line to show up
    events = [json.loads(line) for line in lines]
    assert [(e["event"], e["status"]) for e in events] == [("console_error", 400)], lines


FILES = 256  # the flood test's console: a service's file limit, made small


@pytest.fixture
def small_console(awc_env: dict[str, str]) -> Iterator[str]:
    """A console allowed FILES open files, as a service under a limit is."""
    import resource

    from tick.cli_ui import served_at

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (FILES, FILES))

    env = {**awc_env, "AWC_UI_TOKEN": CONSOLE_TOKEN, "AWC_LOG_FORMAT": "json"}
    proc = subprocess.Popen(awc_command("ui", "--port", "0"), env=env, cwd=ROOT, text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=limit)
    assert proc.stderr is not None
    base = served_at(proc.stderr.readline())
    read_stderr(proc)
    try:
        assert base is not None
        yield base
    finally:
        stop(proc)


def test_a_flood_of_silent_connections_never_keeps_an_operator_out(small_console: str) -> None:
    """More silent and half-sent connections than the console has files: an
    operator still signs in and reads every page at once, since each new
    connection past MAX_CONNECTIONS closes the oldest of those."""
    flood: list[socket.socket] = []
    try:
        for n in range(FILES + 100):
            flood.append(_open(small_console, HALF_HEADERS if n % 2 else b""))
        began = time.monotonic()
        client: Any = signed_in(small_console)
        for path in ["/", "/jobs", "/schedules", "/ticks", "/limits"]:
            assert client.get(path).status_code == 200, path
        # Long before any of the flood's connections timed out.
        assert time.monotonic() - began < HEADER_SECS / 2
        assert MAX_CONNECTIONS <= FILES // 2  # room for the pool, the pipes, the flood
    finally:
        for sock in flood:
            sock.close()


def test_a_page_after_the_server_ended_the_console_s_connections_is_served(
    console: tuple[str, list[str]], conn: Any,
) -> None:
    """The server ended the console's idle pooled connections (a restart,
    idle_session_timeout, pg_terminate_backend): the next page was a 503
    "the database did not answer", every time after an idle spell. Each
    connection is checked as a page takes it."""
    base, _ = console
    client = signed_in(base)
    assert client.get("/").status_code == 200
    ended = conn.execute(
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid() "
        "AND backend_type = 'client backend'").fetchone()
    assert ended is not None and ended[0] >= 1
    for path in ("/", "/jobs", "/"):
        answer = client.get(path)
        assert answer.status_code == 200, (path, answer.status_code, answer.text[:300])
