"""The engine's face (SPEC §6): `Engine` and `tick()`, with the run's types
(`RunSpec`, `Observer`: tick.engine.spec).

Every driver calls the same engine. It owns its database connection, opened
through the factory it is given and replaced only by its own recovery from a
lost connection; it runs handlers on a pool of slot threads; `Engine.run`
hands one bounded pass to a `Coordinator`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from datetime import datetime
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any

from tick.engine.backoff import Jitter
from tick.engine.coordinator import Coordinator
from tick.engine.leases import Leases
from tick.engine.registry import REGISTRY, Registry
from tick.engine.slots import WAKE, SlotPool
from tick.engine.spec import Connect, Maintenance, NullObserver, Observer, RunSpec
from tick.events import EventSink, NullEvents
from tick.history import TickStart
from tick.maintenance import DEFAULT_SCHEDULE_HISTORY_SECS, MaintenanceResult, run_maintenance
from tick.report import TickReport

if TYPE_CHECKING:
    import psycopg

    from tick.schedules.firing import Fired

# The run's types live in tick.engine.spec; they are named here too, as the
# engine's face always offered them.
__all__ = ["Connect", "Engine", "Maintenance", "NullObserver", "Observer", "RunSpec",
           "deadline_from", "maintenance_for", "tick"]


class Engine:
    """Claims, runs and records jobs; reusable across runs."""

    def __init__(
        self,
        connect: Connect,
        *,
        worker_id: str = "awc-worker",
        registry: Registry | None = None,
        events: EventSink | None = None,
        observer: Observer | None = None,
        maintenance: Maintenance | None = None,
    ) -> None:
        self._connect = connect
        self._conn: psycopg.Connection[Any] | None = None
        self.worker_id = worker_id
        self.registry = registry or REGISTRY
        self.events = events or NullEvents()
        self.observer = observer or NullObserver()  # a driver may swap it between runs
        self.maintenance = maintenance
        self.outbox: SimpleQueue[Any] = SimpleQueue()  # slots -> coordinator
        self.pool = SlotPool(self.outbox)
        self._jitters: dict[str, Jitter] = {}
        self.last_tick_id: int | None = None  # the history row of the last run, if any
        # The counts of the run under way, or of the last: a failure is
        # recorded with them (SPEC §16: a failed tick wrote zeros).
        self.last_report: TickReport | None = None
        # When the coordinator began retrying a lost database (time.monotonic()),
        # None while connected; read by the loop's /readyz on another thread.
        self.unreachable_since: float | None = None
        # The leases the current run renews (SPEC §26); /readyz reads why
        # their renewals fail, from another thread.
        self.leases: Leases | None = None

    @property
    def conn(self) -> psycopg.Connection[Any]:
        """The engine's connection, opened through its factory on first use
        and whenever the last one was closed."""
        conn = self._conn
        if conn is None or conn.closed:
            conn = self._conn = self._connect()
        return conn

    def dsn(self) -> str:
        """Where the engine's connection goes, password included, for a
        handler's own reads (`ctx.parents()`, SPEC §20); never logged."""
        from psycopg.conninfo import make_conninfo

        conn = self.conn
        password = conn.pgconn.password
        return make_conninfo(conn.info.dsn, password=password.decode() if password else None)

    def reconnect(self, deadline: float | None = None) -> None:
        """Replace a lost connection (the coordinator's recovery); the run's
        `deadline` bounds the new one's exchanges as it did the old one's."""
        old, self._conn = self._conn, self._connect()
        if deadline is not None:
            from tick.watchdog import DEADLINE_GRACE_SECS, watch

            watch(self._conn, answer_by=deadline + DEADLINE_GRACE_SECS)
        if old is not None and old is not self._conn:
            with contextlib.suppress(Exception):  # broken already
                old.close()

    def close(self) -> None:
        """Close the connection; the next run opens another."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def wake(self) -> None:
        """Look for work now (a NOTIFY arrived, or a stop was requested)."""
        self.outbox.put(WAKE)

    def run(self, spec: RunSpec, stop: threading.Event | None = None) -> TickReport:
        """One bounded pass (SPEC §6): maintenance, then claim-run-record until
        N jobs were claimed, the queue drained, the deadline came, or `stop`."""
        from tick.watchdog import DEADLINE_GRACE_SECS, watch

        self.pool.resize(spec.concurrency)
        self.last_tick_id = None
        self.last_report = None
        # The run's deadline holds against a silent server too (SPEC §6): no
        # exchange of the run waits past it and a short grace.
        if spec.deadline is None:
            return Coordinator(self, spec, stop or threading.Event()).run()
        conn = self.conn
        before = getattr(conn, "answer_by", None)
        watch(conn, answer_by=spec.deadline + DEADLINE_GRACE_SECS)
        try:
            return Coordinator(self, spec, stop or threading.Event()).run()
        finally:
            watch(conn, answer_by=before)
            if self._conn is not None and self._conn is not conn:  # replaced during the run
                watch(self._conn, answer_by=before)

    def slot_name(self, n: int) -> str:
        return f"{self.worker_id}-{n}"

    def jitter(self, slot: str) -> Jitter:
        """The xorshift32 stream of slot `slot` (SPEC §5)."""
        found = self._jitters.get(slot)
        if found is None:
            found = self._jitters[slot] = Jitter(slot)
        return found


def maintenance_for(
    prune_after_secs: float,
    schedule_history_secs: float = DEFAULT_SCHEDULE_HISTORY_SECS,
    tick_history_secs: float | None = None,
    dead_letter_secs: float | None = None,
) -> Maintenance:
    """The maintenance step a tick runs first: rescue, fire due schedules,
    and prune when due."""

    def step(conn: psycopg.Connection[Any], start: TickStart | None,
             deadline: float | None = None,
             report: Callable[[Fired], None] | None = None) -> MaintenanceResult:
        return run_maintenance(conn, prune_after_secs,
                               schedule_history_secs=schedule_history_secs,
                               tick_history_secs=tick_history_secs,
                               dead_letter_secs=dead_letter_secs, start=start,
                               deadline=deadline, report=report)

    return step


def deadline_from(deadline: datetime | None, max_secs: float | None) -> float | None:
    """A `time.monotonic()` instant from a wall-clock deadline and/or a budget."""
    instants = []
    if deadline is not None:
        instants.append(time.monotonic() + deadline.timestamp() - time.time())
    if max_secs is not None:
        instants.append(time.monotonic() + max_secs)
    return min(instants) if instants else None


def tick(
    conn: psycopg.Connection[Any],
    *,
    max_jobs: int = 100,
    deadline: datetime | None = None,
    max_secs: float | None = 55,
    concurrency: int = 4,
    lease_secs: float = 300,
    kinds: list[str] | None = None,
    queues: list[str] | None = None,
    worker_id: str = "awc-worker",
    registry: Registry | None = None,
    stop: threading.Event | None = None,
    stop_grace_secs: float = 30,
    events: EventSink | None = None,
    observer: Observer | None = None,
    prune_after_secs: float = 604800,
) -> TickReport:
    """Run one tick on `conn` (an autocommit connection) and return its report.

    Claims at most `max_jobs`, runs them `concurrency` at a time, and returns
    by `deadline` (a wall-clock instant) or after `max_secs`, whichever is
    sooner. A job's failure is data in the report, never an exception; a lost
    database connection raises `DatabaseError` and the leases recover the
    jobs it held.
    """
    spec = RunSpec(
        max_jobs=max_jobs,
        deadline=deadline_from(deadline, max_secs),
        concurrency=concurrency,
        lease_secs=lease_secs,
        kinds=kinds or None,
        queues=queues or None,
        stop_grace_secs=stop_grace_secs,
    )
    engine = Engine(lambda: conn, worker_id=worker_id, registry=registry, events=events,
                    observer=observer, maintenance=maintenance_for(prune_after_secs))
    return engine.run(spec, stop)
