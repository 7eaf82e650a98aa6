"""What the built-in handlers share in a process: settings, the object store,
and a small connection pool for their own record writes.

The engine's connection belongs to the coordinator; handlers run on slot
threads and take pooled connections (opened on first use, so a tick that
runs no domain job opens none).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tick.db import APPLICATION_NAME, connect_options, pin_session
from tick.engine.context import JobContext
from tick.loaders import clamp_timestamps
from tick.settings import Settings

from .stores.base import ObjectStore

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

# Heartbeat at most this often during long walks.
HEARTBEAT_EVERY_SECS = 5.0


@dataclass
class Runtime:
    """Settings, store and pool of the handlers in this process."""

    settings: Settings
    store: ObjectStore
    _pool: ConnectionPool | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _open_pool(self) -> ConnectionPool:
        from psycopg_pool import ConnectionPool

        from tick.watchdog import WatchedConnection

        with self._lock:
            if self._pool is None:
                self._pool = ConnectionPool(
                    self.settings.dsn(),
                    # A silent database fails a handler's write in bounded
                    # time instead of holding its thread forever.
                    connection_class=WatchedConnection,
                    min_size=1,
                    max_size=max(2, self.settings.worker_concurrency),
                    kwargs=connect_options(prepare=self.settings.db_prepare,
                                           name=f"{APPLICATION_NAME}-handlers",
                                           dsn=self.settings.dsn()),
                    check=ConnectionPool.check_connection,
                    # Rules compare timestamps: infinity must order after
                    # every now(), never fail the row (SPEC §4.2).
                    configure=_configure,
                    name="awc-handlers",
                    open=True,
                )
            return self._pool

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled autocommit connection."""
        pool = self._pool or self._open_pool()
        with pool.connection(timeout=30) as conn:
            yield conn

    def close(self) -> None:
        """Close the pool (end of process, or tests)."""
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None


def _configure(conn: psycopg.Connection[Any]) -> None:
    # Named so the loop's readiness leaves a handler's slow statement to its
    # job's deadline (tick.watchdog).
    conn.purpose = "handlers"  # type: ignore[attr-defined]
    clamp_timestamps(conn)
    pin_session(conn)  # decision 0038: behind a pooler too


_RUNTIME: Runtime | None = None


def install(runtime: Runtime) -> None:
    """Make `runtime` the one the built-in handlers use."""
    global _RUNTIME
    if _RUNTIME is not None and _RUNTIME is not runtime:
        _RUNTIME.close()
    _RUNTIME = runtime


def runtime() -> Runtime:
    """The installed runtime; configured at startup (SPEC §3)."""
    if _RUNTIME is None:
        raise RuntimeError("the AWC handlers are not configured (handlers.configure)")
    return _RUNTIME


def pacer(ctx: JobContext) -> Callable[[], None]:
    """A between-units hook: stop when cancelled, heartbeat every few seconds."""
    last = time.monotonic()

    def between() -> None:
        nonlocal last
        ctx.check()
        now = time.monotonic()
        if now - last >= HEARTBEAT_EVERY_SECS:
            ctx.heartbeat()
            last = now

    return between
