"""`awc ui` (SPEC §19): the console, served by uvicorn.

An operator command: it never migrates (SPEC §3), and it will not start
without `AWC_UI_TOKEN`. It binds its socket itself, so a port in use is one
`awc:` line and exit 1 rather than uvicorn's own exit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from tick.cli_types import Whole
from tick.errors import AwcError, missing_extra
from tick.settings import load_settings

if TYPE_CHECKING:
    import socket

POOL_SIZE = 4  # uvicorn's worker threads borrow these; pages are short
# Longest a page waits for the database, for a pooled connection or for one
# exchange (SPEC §19: a page's queries answer in under 300 ms).
PAGE_ANSWER_SECS = 10.0
SERVING = "awc ui: serving on "  # the line printed once the socket listens


def served_at(line: str) -> str | None:
    """The console's base URL from the line `awc ui` prints once it listens
    (how a supervisor, a test or a benchmark finds a console on --port 0)."""
    if not line.startswith(SERVING):
        return None
    return line[len(SERVING):].split()[0]


class ListenError(AwcError):
    pass


def listen(host: str, port: int) -> socket.socket:
    import socket  # here: every `awc` command imports this module, only `ui` listens

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: without it a kept-alive connection's
    # second response waited 40 ms for the browser's delayed ACK (Nagle).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise ListenError(f"cannot listen on {host}:{port}: {error.strerror}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def _loopback(host: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


@click.command("ui")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; anything but loopback exposes the console.")
@click.option("--port", default=8765, show_default=True, type=Whole(0, 65535))
def ui_command(host: str, port: int) -> None:
    """Serve the web console (needs AWC_UI_TOKEN; AWC_UI_READ_ONLY=true for no actions)."""
    import signal

    # uvicorn stops gracefully on SIGTERM, puts back the handler it found and
    # raises the signal again: the default, so the process ends by the signal
    # as a service manager expects of a clean stop (awc's own handler made
    # it `awc: terminated` and exit 1, a failed unit), from before it says
    # it serves: first, before the half second of imports (a stop in them
    # was `awc: terminated`).
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        import uvicorn
        from psycopg_pool import ConnectionPool
    except ImportError:
        raise missing_extra("awc ui", "ui") from None
    from tick.db import connect_options, pin_session
    from tick.drivers.compose import open_operator_database, operator_session
    from tick.events import StreamEvents
    from tick.ui.app import build_app
    from tick.ui.serve import KEEP_ALIVE_SECS, bounded_protocol

    settings = load_settings()
    token = settings.require_ui_token()
    dsn = settings.dsn()
    open_operator_database(settings).close()  # reachable, and the schema is current
    sock = listen(host, port)
    from tick.watchdog import WatchedConnection

    def configure(conn: Any) -> None:
        # A page's statements take milliseconds: a database silent for longer
        # is a 503 page, never a page that hangs (tick.watchdog).
        conn.limit_secs = PAGE_ANSWER_SECS
        conn.purpose = "console"
        pin_session(conn)  # decision 0038: behind a pooler too
        operator_session(conn)

    # Each connection is checked as a page takes it: one the server ended
    # while idle (a restart, idle_session_timeout) made the next page a 503.
    pool: ConnectionPool[Any] = ConnectionPool(
        dsn, min_size=1, max_size=POOL_SIZE, open=False, configure=configure,
        check=ConnectionPool.check_connection,
        connection_class=WatchedConnection, timeout=PAGE_ANSWER_SECS,
        kwargs=connect_options(prepare=settings.db_prepare, dsn=dsn), name="awc-ui")
    pool.open(wait=True, timeout=10)
    try:
        bound = sock.getsockname()
        mode = " (read-only)" if settings.ui_read_only else ""
        click.echo(f"{SERVING}http://{host}:{bound[1]}{mode}", err=True)
        if not _loopback(host):
            click.echo("awc ui: listening beyond this host; keep it behind a VPN or an "
                       "authenticating proxy (TLS is not served here)", err=True)
        events = StreamEvents(settings.log_format)
        app = build_app(pool, token, settings.ui_read_only, events)
        # log_config=None: uvicorn's own records go through awc's event
        # stream (tick.events.bridge_logging), not its plain-text handlers;
        # its per-request warnings are console_error events of ours.
        # The protocol bounds every connection (tick/ui/serve.py).
        config = uvicorn.Config(app, http=bounded_protocol(events),
                                timeout_keep_alive=KEEP_ALIVE_SECS, log_config=None,
                                log_level="error", access_log=False, server_header=False,
                                proxy_headers=False)
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        pool.close()
        sock.close()
