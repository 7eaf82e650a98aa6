"""The round-trip watchdog (SPEC §3, §6, §7.2): no exchange with the server
waits past its bound, even when the server keeps its socket open and never
answers.

libpq's `tcp_user_timeout` and TCP keepalives only notice a peer whose
kernel stops acknowledging; a server process that hangs (a stuck backend, a
frozen VM behind a live proxy, a pooler that lost its upstream) acknowledges
every byte and answers none, and psycopg then waits forever. So every awc
connection is a `WatchedConnection`: each wait for the server is given a
timeout by psycopg's own waiting function (no thread, no signal), and a wait
that runs out closes the connection and raises `NoAnswer`, which every
caller already treats as a lost connection. See
docs/decisions/0021-a-silent-database.md.

The bound of a wait is the connection's `limit_secs` (by default the server's
own statement timeout plus a grace: a healthy server answers or cancels by
then), cut to `answer_by` when a driver has a deadline to keep (a tick's
deadline plus `DEADLINE_GRACE_SECS`). Which exchanges are waiting, and since
when, is in-process state the loop's `/readyz` reads (`stuck`).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, Self

import psycopg
from psycopg import errors as pg_errors

# After its deadline a tick waits at most this long for the database: enough
# for a healthy server to take the last outcomes, never a hang.
DEADLINE_GRACE_SECS = 2.0
# The default bound of one wait: the server cancels a statement at its
# statement timeout and says so, so a longer silence is not a slow query.
# (tick.db's STATEMENT_TIMEOUT_MS plus 5 s, written out: tick.db imports this
# module, never the other way; a test holds the two together.)
EXCHANGE_LIMIT_SECS = 65.0
# An exchange that starts past its `answer_by` still gets this long: a
# healthy server answers in milliseconds, a silent one cannot hold it.
MIN_WAIT_SECS = 0.25
# How long the cancel of an exchange given up on may take (within its bound).
CANCEL_SECS = 0.5

# Applying a migration file: many statements, each under the statement
# timeout, in one exchange; a file on a large table may legitimately take
# minutes, and must never be cut by a tick's deadline (it would roll back,
# and every later tick would cut it again).
MIGRATION_LIMIT_SECS = 600.0

# psycopg's waiting functions raise this private OperationalError subclass
# when their timeout expires (psycopg >= 3.3, pinned in pyproject). Named
# directly, so a psycopg without it fails at import, not silently.
_WAIT_TIMEOUT = pg_errors._WaitTimeout

_LIVE: weakref.WeakSet[WatchedConnection] = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()


class NoAnswer(psycopg.OperationalError):
    """The database kept the connection open but did not answer in time; the
    connection was closed."""


class WatchedConnection(psycopg.Connection[Any]):
    """An awc connection whose every exchange answers within its bound."""

    # Set per connection by whoever owns it (a driver, the console's pool).
    limit_secs: float = EXCHANGE_LIMIT_SECS
    answer_by: float | None = None  # a time.monotonic() instant, or None
    purpose: str = "database"  # what /readyz calls this connection
    waiting_since: float | None = None  # read by `stuck` on another thread

    @classmethod
    def connect(cls, conninfo: str = "", **kwargs: Any) -> Self:
        conn = super().connect(conninfo, **kwargs)
        with _LIVE_LOCK:
            _LIVE.add(conn)
        return conn

    def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        if timeout is not None:
            # psycopg's own bounded wait (`notifies(timeout=...)`): waiting
            # for a notification is not an exchange the server owes an answer.
            return super().wait(gen, interval, timeout)
        now = time.monotonic()
        bound = self.limit_secs
        if self.answer_by is not None:
            bound = max(min(bound, self.answer_by - now - CANCEL_SECS), MIN_WAIT_SECS)
        self.waiting_since = now
        try:
            return super().wait(gen, interval, bound)
        except _WAIT_TIMEOUT:
            # The server may still be running the statement (slow, not gone):
            # cancelled, it commits nothing after awc gave up on it (a claim
            # that committed then left its jobs RUNNING to their leases, an
            # attempt spent, never run). A silent server leaves the request
            # unanswered too: it has CANCEL_SECS, taken from the wait's bound
            # above. libpq's older cancel blocks, holding the interpreter, as
            # long as a silent server keeps its socket: without libpq 17's,
            # none is sent.
            with suppress(Exception):
                if psycopg.capabilities.has_cancel_safe():
                    self.cancel_safe(timeout=CANCEL_SECS)
            # The exchange stopped half way: the connection is in an unknown
            # state and must never be used again. Closed, it reads as lost.
            self.pgconn.finish()
            raise NoAnswer(f"the database did not answer within {bound:.1f} s "
                           "(connection closed)") from None
        finally:
            self.waiting_since = None


def watch(conn: psycopg.Connection[Any], *, answer_by: float | None,
          limit_secs: float | None = None) -> None:
    """Set the bounds of `conn`'s exchanges (a connection awc did not open is
    left alone: its owner chose its timeouts)."""
    if not isinstance(conn, WatchedConnection):
        return
    conn.answer_by = answer_by
    if limit_secs is not None:
        conn.limit_secs = limit_secs


# Connections whose slow exchange is a job's business (its deadline cuts it),
# not the process's readiness.
NOT_FOR_READINESS = frozenset({"handlers"})


@contextmanager
def migrating(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """Inside: `conn`'s exchanges are bounded for applying a migration
    (`MIGRATION_LIMIT_SECS`, no deadline); the bounds before, after."""
    if not isinstance(conn, WatchedConnection):
        yield
        return
    before = conn.answer_by, conn.limit_secs
    conn.answer_by, conn.limit_secs = None, MIGRATION_LIMIT_SECS
    try:
        yield
    finally:
        conn.answer_by, conn.limit_secs = before


@contextmanager
def answering_by(conn: psycopg.Connection[Any], instant: float | None) -> Iterator[None]:
    """Inside: `conn`'s exchanges end by `instant` (a time.monotonic()
    instant; None: no change) as well as by the bounds they had; those
    bounds, after. A call that promised its caller a deadline (`tick.wait`)
    keeps it against a silent server too."""
    if instant is None or not isinstance(conn, WatchedConnection):
        yield
        return
    before = conn.answer_by
    conn.answer_by = instant if before is None else min(before, instant)
    try:
        yield
    finally:
        conn.answer_by = before


def stuck(longer_than: float) -> list[str]:
    """The open connections of this process (but the handlers') whose
    exchange has waited for the server longer than `longer_than` seconds, as
    "<purpose>: no answer for N s"; no I/O (SPEC §7.2: `/readyz`)."""
    now = time.monotonic()
    with _LIVE_LOCK:
        conns = [c for c in _LIVE if c.purpose not in NOT_FOR_READINESS]
    out = []
    for conn in conns:
        since = conn.waiting_since
        if since is not None and now - since > longer_than and not conn.closed:
            out.append(f"{conn.purpose}: no answer for {now - since:.0f} s")
    return sorted(out)
