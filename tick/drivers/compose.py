"""Settings become a connection, an Engine and a RunSpec here, and only here.

The startup order is fixed (SPEC §3): settings, connect, migrate, object
store, handlers, run. Every driver goes through this module.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tick.db import connect
from tick.engine.api import Engine, maintenance_for
from tick.engine.registry import import_handler_modules
from tick.engine.spec import Connect, Maintenance, Observer, RunSpec
from tick.events import EventSink
from tick.history import TickStart
from tick.migrate import migrate, require_current
from tick.report import TickReport
from tick.settings import Settings

if TYPE_CHECKING:
    import psycopg


# How long a long-running process (the loop, `awc maintenance run`) rides
# out a connection lost once made, as it checks its schema at the start.
START_RIDE_OUT_SECS = 60.0


def open_database(settings: Settings, *, answer_by: float | None = None,
                  purpose: str = "database", dsn: str | None = None,
                  migrations: bool = True,
                  ride_out_until: float | None = None) -> psycopg.Connection[Any]:
    """Connect and apply (or check) migrations per `AWC_MIGRATE`; with
    `answer_by` (a tick's deadline plus its grace), neither waits past it.
    `dsn` replaces the settings' URL (the Lambda's from Secrets Manager);
    without `migrations` the schema is taken as checked already (a warm
    Lambda's new connection: migrations run on a cold start only).

    A connection lost once connected (a failover, an ended backend, as the
    schema is checked) is ridden out until `ride_out_until` (a
    `time.monotonic()` instant), as a run rides out one it loses later
    (decision 0035); a first connect that fails is the run's error at once,
    so a wrong host or password is said now, not at the deadline."""
    import time

    import psycopg

    from tick.db import as_database_error
    from tick.engine.backoff import Jitter, reconnect_delay
    from tick.errors import DatabaseError

    attempt, jitter, connected = 0, Jitter(settings.worker_id), False
    while True:
        conn = None
        try:
            conn = connect(dsn or settings.dsn(), prepare=settings.db_prepare,
                           answer_by=answer_by, purpose=purpose)
            connected = True
            if migrations:
                try:
                    migrate(conn, settings.migrate)
                except psycopg.Error as error:  # lost as the schema was checked, or refused
                    raise as_database_error(error, "migrating the schema", conn) from None
            return conn
        except BaseException as error:
            if conn is not None:
                conn.close()
            # A first connect that fails is no loss: unreachable from the start.
            delay = reconnect_delay(attempt, jitter)
            if (not isinstance(error, DatabaseError) or not error.connection_lost
                    or not connected or ride_out_until is None
                    or time.monotonic() + delay >= ride_out_until):
                raise
        time.sleep(delay)
        attempt += 1


def open_operator_database(settings: Settings,
                           answer_by: float | None = None) -> psycopg.Connection[Any]:
    """Connect for a read-only or operator command: the schema must be
    current and is never changed (SPEC §3); values PostgreSQL holds but
    Python cannot load (an infinite timestamp, jsonb nested too deeply) are
    shown as the server writes them. `answer_by` (a `time.monotonic()`
    instant) bounds the connect and the checks after it, for a command with
    a deadline of its own (`awc wait --timeout`)."""
    conn = connect(settings.dsn(), prepare=settings.db_prepare, answer_by=answer_by)
    try:
        require_current(conn)
    except BaseException:
        conn.close()
        raise
    operator_session(conn)
    return conn


def operator_session(conn: psycopg.Connection[Any]) -> None:
    """How an operator's connection (a CLI command, the console's pool) reads:
    values Python cannot hold shown as the server writes them, and no JIT:
    their statements are small and bounded, and a cost estimate inflated by
    a capped subquery made PostgreSQL spend 0.5 s compiling `awc limits
    list` on a 1M-job table."""
    from tick.loaders import for_operators

    for_operators(conn)
    conn.execute("SET jit = off")


def prepare_handlers(settings: Settings) -> None:
    """Open the object store (`AWC_CAS_URL`, required: a missing one is a
    settings error), then register the built-in kinds and `AWC_HANDLER_MODULES`."""
    import tick.handlers as handlers

    handlers.configure(settings)
    import_handler_modules(settings.handler_module_names)
    # Startup is over: what it allocated (modules, the settings, the registry,
    # the store) lives as long as the process. Frozen, the collector stops
    # walking it on every full collection while jobs churn short-lived
    # objects (a 20,000-job drain: 76 ms of collections become 28 ms).
    gc.freeze()


def connector(settings: Settings, purpose: str = "database") -> Connect:
    """A factory of new connections with the settings' options."""
    return lambda: connect(settings.dsn(), prepare=settings.db_prepare, purpose=purpose)


def engine_for(
    settings: Settings,
    conn: psycopg.Connection[Any],
    *,
    events: EventSink,
    observer: Observer | None = None,
    maintenance: bool = True,
    connect: Connect | None = None,
) -> Engine:
    """The engine of a driver: it starts on `conn` (connected and migrated)
    and opens later connections through `connect` (new ones by default)."""
    first = [conn]
    more = connect or connector(settings)

    def connection() -> psycopg.Connection[Any]:
        return first.pop() if first else more()

    return Engine(
        connection,
        worker_id=settings.worker_id,
        events=events,
        observer=observer,
        maintenance=maintenance_of(settings) if maintenance else None,
    )


def maintenance_of(settings: Settings) -> Maintenance:
    """The maintenance pass the settings ask for (retentions, prune age)."""
    return maintenance_for(settings.prune_after_secs, settings.schedule_history_secs,
                           settings.tick_history_secs, settings.dead_letter_retention_secs)


def tick_spec(
    settings: Settings,
    *,
    deadline: float,
    max_jobs: int | None = None,
    kinds: list[str] | None = None,
    queues: list[str] | None = None,
    driver: str | None = None,
    correlation_id: str | None = None,
) -> RunSpec:
    """One tick's bounds from the settings (`awc tick`, the Lambda, the demo);
    with a `driver`, the tick has its row in the history (SPEC §16)."""
    from tick.queue import new_nonce  # a uuid's text, as a claim's nonce

    # The row's key: the maintenance pass sent again after a lost connection
    # opens no second row (SPEC §16).
    history = None if driver is None else TickStart(
        driver, settings.worker_id, correlation_id, deadline, row_key=new_nonce())
    return RunSpec(
        history=history,
        max_jobs=max_jobs or settings.tick_max_jobs,
        deadline=deadline,
        concurrency=settings.worker_concurrency,
        lease_secs=settings.worker_lease_secs,
        kinds=kinds or None,
        queues=queues or None,
        stop_grace_secs=settings.stop_grace_secs,
        reconnect=True,
    )


def loop_spec(
    settings: Settings,
    *,
    on_report: Callable[[TickReport], None],
    kinds: list[str] | None = None,
    queues: list[str] | None = None,
) -> RunSpec:
    """The loop's continuous run from the settings (`awc loop`); each busy
    stretch has its row in the history (SPEC §16)."""
    return RunSpec(
        history=TickStart("loop", settings.worker_id),
        concurrency=settings.worker_concurrency,
        lease_secs=settings.worker_lease_secs,
        stop_grace_secs=settings.stop_grace_secs,
        continuous=True,
        reconnect=True,
        poll_interval_s=settings.worker_poll_interval_ms / 1000,
        on_report=on_report,
        kinds=kinds or None,
        queues=queues or None,
    )


def record_failure(settings: Settings, start: TickStart | None, tick_id: int | None,
                   error: BaseException, dsn: Callable[[], str] | None = None,
                   report: TickReport | None = None) -> None:
    """A failed tick's history (SPEC §16): its row completed with the `awc:`
    line and the counts it had (`report`: the jobs it claimed and recorded
    before it failed; it wrote zeros), or a whole row when it failed before
    it had one. On a connection of
    its own, since the tick's may be the thing that broke; best effort. `dsn`
    gives the connection string when it is not `DATABASE_URL` (the Lambda's
    secret)."""
    import contextlib
    import time

    from tick.history import finish, record
    from tick.redaction import redacted
    from tick.watchdog import DEADLINE_GRACE_SECS

    if start is None:
        return
    # Its own short bound: the database may be the silent one that failed
    # the tick, and the tick's deadline has been kept so far.
    with contextlib.suppress(Exception), connect(
            (dsn or settings.dsn)(), prepare=settings.db_prepare,
            answer_by=time.monotonic() + DEADLINE_GRACE_SECS) as conn:
        message = f"awc: {redacted(str(error))}"[:1000]
        if tick_id is not None:
            finish(conn, tick_id, report, message)
        else:
            record(conn, start, report, error=message)
