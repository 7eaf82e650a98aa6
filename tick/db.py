"""Connections (SPEC §3): timeouts, prepared statements, and safe error text.

Every connection carries a connect timeout and a statement timeout, runs in
autocommit (each queue statement is its own transaction, so nothing keeps
session state between them and a transaction-pooling proxy works), and turns
server-side prepared statements off when `AWC_DB_PREPARE=false`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

from tick.errors import DatabaseError, SettingsError
from tick.faults import PREPARED_GONE, session_ended
from tick.redaction import dsn_secrets, keep_secret, redacted
from tick.text import clip, printable

if TYPE_CHECKING:
    from datetime import datetime

    import psycopg

CONNECT_TIMEOUT_SECS = 10
STATEMENT_TIMEOUT_MS = 60_000
APPLICATION_NAME = "awc"


def _password_of(dsn: str) -> str | None:
    from psycopg.conninfo import conninfo_to_dict

    try:
        value = conninfo_to_dict(dsn).get("password")
    except Exception:
        return None
    return str(value) if value else None


def describe_target(dsn: str) -> str:
    """Where a DSN points (host, port, database), with no credentials."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(dsn)
    except Exception:
        return "the database (unparsable connection string)"
    host = parts.get("host") or "local socket"
    port = parts.get("port") or "5432"
    name = parts.get("dbname") or "default database"
    return f"{host}:{port}/{name}"


_LIBPQ_GUESS = re.compile(r"\s*" + r"\s+".join(
    "This probably means the server terminated abnormally before or while processing the "
    "request.".replace(".", r"\.").split()))


def scrub(message: str, dsn: str | None = None) -> str:
    """A database error message made safe to print: no password, one line,
    nothing that cannot be written as UTF-8."""
    # libpq's guess after a closed connection blames the server, which is
    # as often a backend an administrator ended, a proxy or a failover.
    # Its lines are separate messages ("cannot exit pipeline mode while
    # busy", then "server closed the connection unexpectedly"): joined by a
    # semicolon, not run together.
    unguessed = _LIBPQ_GUESS.sub("", printable(message))
    lines = (" ".join(line.split()) for line in unguessed.splitlines())
    text = redacted("; ".join(line for line in lines if line))
    if dsn:
        password = _password_of(dsn)
        if password and len(password) >= 3:
            text = text.replace(password, "***")
    return text


_HEX = frozenset("0123456789abcdefABCDEF")


def dsn_problem(dsn: str) -> str | None:
    """What is wrong with a (stripped, non-empty) connection string, quoting
    nothing of it; None when libpq reads it the way it was meant (SPEC §3).

    libpq parses a URL whose password holds a raw `@`, `/`, `?`, `#` or `%`
    as something else (the rest of the password becomes the host, port or
    database), and then quotes that part back in its errors. Such a URL is
    refused here, before anything can echo it.
    """
    from psycopg.conninfo import conninfo_to_dict

    if "://" in dsn:
        scheme, rest = dsn.split("://", 1)
        if scheme not in ("postgresql", "postgres"):
            return "must be a postgresql:// connection string"
        for at, char in enumerate(rest):
            if char == "%" and not (rest[at + 1:at + 2] in _HEX and rest[at + 2:at + 3] in _HEX):
                return "a raw '%' must be percent-encoded (%25), e.g. in the password"
        cut = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0),
                  default=len(rest))
        authority, tail = rest[:cut], rest[cut:]
        if authority.count("@") > 1 or "@" in tail:
            return ("the user or password holds a raw '@', '/', '?' or '#'; "
                    "percent-encode it (%40, %2F, %3F, %23)")
    try:
        parts = conninfo_to_dict(dsn)
    except Exception:
        return "is not a valid connection string"
    port = str(parts.get("port") or "")
    if port and not all(p.isdigit() for p in port.split(",")):
        return "the port is not a number"
    return None


def check_dsn(text: str, source: str) -> str:
    """`text` stripped, or a `SettingsError` naming `source` (blank is missing)."""
    dsn = text.strip()
    keep_secret(*dsn_secrets(dsn))
    if not dsn:
        raise SettingsError(f"{source} is required but not set")
    problem = dsn_problem(dsn)
    if problem is not None:
        raise SettingsError(f"{source}: {problem}")
    return dsn


POOLER_HINT = ("a transaction pooler in front of PostgreSQL? set AWC_DB_PREPARE=false, or "
               "max_prepared_statements in PgBouncer 1.21 or later; meanwhile awc connects "
               "again without prepared statements")
_shared_sessions = False  # one was seen: this process prepares nothing from now on


def session_lost(conn: psycopg.Connection[Any] | None, error: BaseException) -> bool:
    """Whether `error` leaves `conn`'s session unusable for the run: the
    connection lost, or its prepared statements (PREPARED_GONE): a run
    connects again for either."""
    return (connection_lost(conn) or session_ended(error)
            or getattr(error, "sqlstate", None) in PREPARED_GONE)


def connection_lost(conn: psycopg.Connection[Any] | None) -> bool:
    """True when `conn` can no longer be used (as opposed to a statement the
    server refused on a healthy connection)."""
    return conn is None or conn.closed or conn.broken


def database_error(
    error: BaseException,
    dsn: str | None,
    doing: str,
    conn: psycopg.Connection[Any] | None = None,
) -> DatabaseError:
    """A `DatabaseError` naming what failed by error type and scrubbed message;
    `connection_lost` is read from `conn`'s state after the failure.

    A server's error is told by its primary message alone, cut to 300
    characters: its DETAIL may quote a row's values ("Failing row contains
    ...", a unique key), and its CONTEXT the text of every statement of a
    function it passed through."""
    kind = type(error).__name__
    diag = getattr(error, "diag", None)
    primary = getattr(diag, "message_primary", None) if diag is not None else None
    detail = clip(scrub(primary if isinstance(primary, str) and primary else str(error), dsn),
                  300) or "no detail"
    if getattr(error, "sqlstate", None) in PREPARED_GONE:
        # Not this connection's fault, nor any statement's: the session is
        # shared. Taken for a lost connection, so a run connects again, and
        # every connection after it prepares nothing (connect_options).
        global _shared_sessions
        _shared_sessions = True
        return DatabaseError(f"{doing}: {kind}: {detail} ({POOLER_HINT})", connection_lost=True)
    return DatabaseError(f"{doing}: {kind}: {detail}",
                         connection_lost=connection_lost(conn) or session_ended(error))


def as_database_error(
    error: BaseException, doing: str, conn: psycopg.Connection[Any] | None
) -> DatabaseError:
    """`error` as a `DatabaseError` (unchanged if it is one already)."""
    if isinstance(error, DatabaseError):
        return error
    return database_error(error, None, doing, conn)


_DEALLOCATIONS = 0  # refused exchanges so far (one_exchange)


@contextmanager
def one_exchange(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """Run the statements executed inside as one transaction in one exchange
    with the server: BEGIN, them, COMMIT, pipelined behind a single Sync.

    psycopg's `transaction()` in a pipeline syncs at BEGIN and at COMMIT, so a
    round trip costs three or four turns of the connection; this one costs
    one. Results are read after the block. If anything fails, the open
    transaction is rolled back and the error raised.
    """
    from psycopg import pq

    try:
        with conn.pipeline():
            # READ COMMITTED whatever the session's default: the claim and
            # the fenced writes rely on it (decision 0038).
            conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
            yield
            conn.execute("COMMIT")
    except BaseException:
        if conn.info.transaction_status in (pq.TransactionStatus.INTRANS,
                                            pq.TransactionStatus.INERROR):
            # A lost connection took its transaction with it.
            with suppress(Exception):
                conn.execute("ROLLBACK")
        if conn.info.transaction_status == pq.TransactionStatus.IDLE:
            # The server skipped everything after the failed statement up to
            # the Sync, including the Parse of any statement psycopg chose to
            # prepare in this exchange, which psycopg may still count as
            # prepared: every later use would fail with "prepared statement
            # does not exist" (the loop then crash-loops). DEALLOCATE ALL
            # empties both sides: psycopg forgets its own names when it sees
            # the command succeed, but only the first time it meets that
            # query text, so each one is made new.
            global _DEALLOCATIONS
            _DEALLOCATIONS += 1
            with suppress(Exception):
                conn.execute(f"DEALLOCATE ALL /* refused exchange {_DEALLOCATIONS} */")
        raise


def connect_options(*, prepare: bool = True, name: str = APPLICATION_NAME,
                    dsn: str | None = None) -> dict[str, Any]:
    """The options of every awc connection (autocommit, timeouts, its
    application `name`), for `connect` and for a pool that opens connections
    itself (the console, the handlers' runtime). The operator's own startup
    options (`options=` in `dsn`, else PGOPTIONS) are kept (passed as a
    keyword, awc's replaced them whole): after awc's timeouts, which they
    may change, and before the settings awc reads by (PINNED), which they
    may not: a URL's extra_float_digits -15 read a 26 s lease as 30 s."""
    import os

    given = os.environ.get("PGOPTIONS")
    if dsn is not None:
        from psycopg.conninfo import conninfo_to_dict

        with suppress(Exception):  # a DSN that does not parse fails at connect, named
            given = str(conninfo_to_dict(dsn).get("options") or "") or given
    ours = f"-c statement_timeout={STATEMENT_TIMEOUT_MS} -c jit=off"
    return {
        "autocommit": True,
        "prepare_threshold": 5 if prepare and not _shared_sessions else None,
        "connect_timeout": CONNECT_TIMEOUT_SECS,
        "application_name": name,
        # UTF-8 whatever PGCLIENTENCODING says: awc's text is any Unicode.
        "client_encoding": "utf8",
        # No JIT: awc's statements are bounded reads and writes; PostgreSQL
        # compiled a Limits page whose estimates were high for a second to
        # run it in 3 ms (the engine's transactions pin it off as well).
        # And what awc reads and how its transactions behave, whatever the
        # role or the database sets (decision 0038): READ COMMITTED (a
        # role's SERIALIZABLE failed outcomes, and jobs ran twice), floats
        # in full (extra_float_digits -15 read a 26 s lease as 30 s), ISO
        # dates (the only style psycopg reads).
        "options": f"{ours} {given.strip()} {PINNED}" if given and given.strip()
        else f"{ours} {PINNED}",
    }


# The session settings awc's reading of results depends on (decision 0038).
# A transaction-pooling proxy may drop startup options: the engine's
# transactions set them again (`pin_plans.sql`) and begin READ COMMITTED.
PINNED = ("-c default_transaction_isolation=read\\ committed -c extra_float_digits=3 "
          "-c DateStyle=ISO,\\ MDY -c IntervalStyle=postgres")


def pin_session(conn: psycopg.Connection[Any]) -> None:
    """What awc reads, again where a transaction-pooling proxy dropped the
    startup options (decision 0038): the transactions psycopg begins are
    READ COMMITTED, and DateStyle and IntervalStyle, which the server
    reports, are set when they are not awc's (PgBouncer keeps a client's
    DateStyle across the server connections it lends it). Nothing is sent
    when the options held. For every awc connection and pool."""
    import psycopg

    conn.isolation_level = psycopg.IsolationLevel.READ_COMMITTED
    if not (conn.info.parameter_status("DateStyle") or "ISO").startswith("ISO"):
        conn.execute("SET DateStyle = 'ISO, MDY'")
    if (conn.info.parameter_status("IntervalStyle") or "postgres") != "postgres":
        conn.execute("SET IntervalStyle = 'postgres'")


def connect(dsn: str, *, prepare: bool = True, answer_by: float | None = None,
            purpose: str = "database", **kwargs: Any) -> psycopg.Connection[Any]:
    """Open an autocommit connection with awc's timeouts, reading every
    timestamp PostgreSQL can store.

    Every exchange on it answers within its bound, or the connection is
    closed (`tick.watchdog`); `answer_by` (a `time.monotonic()` instant, a
    driver's deadline plus its grace) bounds the connect and every later
    exchange too, so a tick keeps its deadline against a silent server.
    A failure is a `DatabaseError` whose text names the target without its
    password. `purpose` names it where a stuck exchange is reported.
    """
    import time

    import psycopg

    from tick.loaders import clamp_timestamps
    from tick.watchdog import WatchedConnection, watch

    options = connect_options(prepare=prepare, dsn=dsn)
    if answer_by is not None:
        # libpq's minimum is 2 s; whole seconds only.
        left = max(int(answer_by - time.monotonic()), 2)
        options["connect_timeout"] = min(CONNECT_TIMEOUT_SECS, left)
    try:
        conn = WatchedConnection.connect(dsn, **options, **kwargs)
    except psycopg.Error as error:
        raise database_error(
            error, dsn, f"cannot connect to {describe_target(dsn)}"
        ) from None
    encoding = conn.info.parameter_status("server_encoding")
    if encoding is not None and encoding.upper() != "UTF8":
        # SQL_ASCII handed every text back as bytes (a migration's checksum
        # then "changed"), LATIN1 refused a handler's error text and its job
        # was dead-lettered: refused here, by name, before anything runs.
        conn.close()
        raise DatabaseError(
            f"the database at {describe_target(dsn)} is in {printable(encoding)[:40]}; awc "
            "stores any Unicode text and needs a UTF8 database (CREATE DATABASE ... "
            "ENCODING 'UTF8')")
    watch(conn, answer_by=answer_by)
    conn.purpose = purpose  # how the loop's /readyz names it
    try:  # bounded by the watch, a failure told as the connect's
        pin_session(conn)
    except psycopg.Error as error:
        conn.close()
        raise database_error(error, dsn, f"cannot connect to {describe_target(dsn)}",
                             conn) from None
    # Any timestamptz column may hold what Python cannot (`-infinity`, a date
    # BC, a year past 9999): psycopg's own loader would raise for the whole
    # row, and one such row in awc.schedules, awc.ticks or the ledger would
    # stop every tick (SPEC §4.2). Read on this connection, such an instant
    # orders as it should (datetime.min / max); an operator's connection
    # shows it as the server wrote it instead (tick.loaders.for_operators).
    clamp_timestamps(conn)
    return conn


def database_now(conn: psycopg.Connection[Any]) -> datetime:
    """Now on the database's clock, the one every time decision uses (SPEC
    §15, §16): the claim, the due check and `awc ticks` compare with it, and
    a host's clock may disagree."""
    from tick.statements import sql

    row = conn.execute(sql("database_now")).fetchone()
    assert row is not None
    now: datetime = row[0]
    return now
