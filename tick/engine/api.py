"""The engine's face (SPEC §6): `Engine`, `RunSpec` and `tick()`.

Every driver calls the same engine. It owns its database connection, opened
through the factory it is given and replaced only by its own recovery from a
lost connection; it runs handlers on a pool of slot threads; `Engine.run`
hands one bounded pass to a `Coordinator`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any, Protocol

from tick.engine.backoff import Jitter
from tick.engine.registry import MAX_LEASE_SECS, REGISTRY, Registry
from tick.engine.slots import WAKE, SlotPool
from tick.events import EventSink, JobEvent, NullEvents
from tick.history import TickStart
from tick.maintenance import DEFAULT_SCHEDULE_HISTORY_SECS, MaintenanceResult, run_maintenance
from tick.report import Lags, ScheduleFire, TickReport

if TYPE_CHECKING:
    import psycopg

    from tick.schedules.firing import Fired

Connect = Callable[[], "psycopg.Connection[Any]"]
# A maintenance pass; given a TickStart, it also inserts the tick's history
# row; given a deadline (a time.monotonic() instant), it ends by then, and
# hands each schedule's recorded fires to the reporter as it goes.
Maintenance = Callable[["psycopg.Connection[Any]", "TickStart | None", "float | None",
                        "Callable[[Fired], None] | None"], MaintenanceResult]


class Observer(Protocol):
    """Receives what metrics need (SPEC §9); `tick.metrics` implements it."""

    def claimed(self, kind: str, wait_s: float) -> None: ...

    def processed(self, events: list[JobEvent]) -> None: ...

    def api_error(self, component: str) -> None: ...

    def schedules_fired(self, fires: Sequence[ScheduleFire], lags: Lags) -> None: ...


class NullObserver:
    """Records nothing."""

    def claimed(self, kind: str, wait_s: float) -> None:
        pass

    def processed(self, events: list[JobEvent]) -> None:
        pass

    def api_error(self, component: str) -> None:
        pass

    def schedules_fired(self, fires: Sequence[ScheduleFire], lags: Lags) -> None:
        pass


@dataclass(frozen=True, slots=True)
class RunSpec:
    """What one run of the engine may do."""

    max_jobs: int | None = None  # None: no limit
    deadline: float | None = None  # time.monotonic() instant; None: none
    concurrency: int = 4
    lease_secs: float = 300
    kinds: list[str] | None = None
    queues: list[str] | None = None
    stop_grace_secs: float = 30
    # The loop keeps claiming after the queue drained (on a wake or poll)
    # instead of ending the run, reports each busy stretch as a tick, and
    # rides out a database outage by reconnecting.
    continuous: bool = False
    poll_interval_s: float = 1.0
    on_report: Callable[[TickReport], None] | None = None
    # Who runs this tick, for its row in awc.ticks (SPEC §16); None: no row.
    history: TickStart | None = None

    def __post_init__(self) -> None:
        # Bounds as SPEC §2 gives them: a lease PostgreSQL cannot add to now()
        # would fail every claim of the run, not this caller's call.
        if not 0 < self.lease_secs <= MAX_LEASE_SECS:
            raise ValueError(f"lease_secs must be in (0, {MAX_LEASE_SECS}]")
        if not 1 <= self.concurrency <= 256:
            raise ValueError("concurrency must be between 1 and 256")
        if self.max_jobs is not None and self.max_jobs < 1:
            raise ValueError("max_jobs must be at least 1")
        if not 0 <= self.stop_grace_secs <= 86400:
            raise ValueError("stop_grace_secs must be between 0 and 86400")


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
        # When the coordinator began retrying a lost database (time.monotonic()),
        # None while connected; read by the loop's /readyz on another thread.
        self.unreachable_since: float | None = None

    @property
    def conn(self) -> psycopg.Connection[Any]:
        """The engine's connection, opened through its factory on first use
        and whenever the last one was closed."""
        conn = self._conn
        if conn is None or conn.closed:
            conn = self._conn = self._connect()
        return conn

    def reconnect(self) -> None:
        """Replace a lost connection (the coordinator's recovery)."""
        old, self._conn = self._conn, self._connect()
        if old is not None:
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
        from tick.engine.coordinator import Coordinator
        from tick.watchdog import DEADLINE_GRACE_SECS, watch

        self.pool.resize(spec.concurrency)
        self.last_tick_id = None
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
