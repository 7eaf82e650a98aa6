"""Connections (SPEC §3): timeouts, prepared statements, and safe error text.

Every connection carries a connect timeout and a statement timeout, runs in
autocommit (each queue statement is its own transaction, so nothing keeps
session state between them and a transaction-pooling proxy works), and turns
server-side prepared statements off when `AWC_DB_PREPARE=false`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from tick.errors import DatabaseError

if TYPE_CHECKING:
    import psycopg

CONNECT_TIMEOUT_SECS = 10
STATEMENT_TIMEOUT_MS = 60_000
APPLICATION_NAME = "awc"

_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)([^@\s]*)(@)")
_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def redact(text: str) -> str:
    """`text` with any connection-string password replaced by `***`."""
    text = _URL_PASSWORD.sub(r"\1***\3", text)
    return _KV_PASSWORD.sub(r"\1***", text)


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


def scrub(message: str, dsn: str | None = None) -> str:
    """A database error message made safe to print: no password, one line."""
    text = redact(" ".join(message.split()))
    if dsn:
        password = _password_of(dsn)
        if password and len(password) >= 3:
            text = text.replace(password, "***")
    return text


def database_error(error: BaseException, dsn: str | None, doing: str) -> DatabaseError:
    """A `DatabaseError` naming what failed by error type and scrubbed message."""
    kind = type(error).__name__
    detail = scrub(str(error), dsn) or "no detail"
    return DatabaseError(f"{doing}: {kind}: {detail}")


def connect(dsn: str, *, prepare: bool = True, **kwargs: Any) -> psycopg.Connection[Any]:
    """Open an autocommit connection with awc's timeouts.

    A failure is a `DatabaseError` whose text names the target without its
    password.
    """
    import psycopg

    try:
        return psycopg.connect(
            dsn,
            autocommit=True,
            prepare_threshold=5 if prepare else None,
            connect_timeout=CONNECT_TIMEOUT_SECS,
            application_name=APPLICATION_NAME,
            options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS}",
            **kwargs,
        )
    except psycopg.Error as error:
        raise database_error(
            error, dsn, f"cannot connect to {describe_target(dsn)}"
        ) from None
