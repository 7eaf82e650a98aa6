"""`tick()`: one bounded pass over the queue (SPEC §6), as a function."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tick.engine import Engine, Observer, RunSpec
from tick.events import EventSink
from tick.maintenance import MaintenanceResult, run_maintenance
from tick.registry import Registry
from tick.report import TickReport
from tick.settings import Settings

if TYPE_CHECKING:
    import psycopg


def deadline_from(deadline: datetime | None, max_secs: float | None) -> float | None:
    """A `time.monotonic()` instant from a wall-clock deadline and/or a budget."""
    instants = []
    if deadline is not None:
        left = deadline.timestamp() - time.time()
        instants.append(time.monotonic() + left)
    if max_secs is not None:
        instants.append(time.monotonic() + max_secs)
    return min(instants) if instants else None


def maintenance_for(
    prune_after_secs: float,
) -> Callable[[psycopg.Connection[Any]], MaintenanceResult]:
    """The maintenance step a tick runs first: rescue, and prune when due."""

    def step(conn: psycopg.Connection[Any]) -> MaintenanceResult:
        return run_maintenance(conn, prune_after_secs)

    return step


def tick_spec(
    settings: Settings,
    *,
    deadline: float,
    max_jobs: int | None = None,
    kinds: list[str] | None = None,
    queues: list[str] | None = None,
) -> RunSpec:
    """One tick's bounds from the settings (the CLI tick and the Lambda)."""
    return RunSpec(
        max_jobs=max_jobs or settings.tick_max_jobs,
        deadline=deadline,
        concurrency=settings.worker_concurrency,
        lease_secs=settings.worker_lease_secs,
        kinds=kinds or None,
        queues=queues or None,
        stop_grace_secs=settings.stop_grace_secs,
    )


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
    engine = Engine(
        conn,
        worker_id=worker_id,
        registry=registry,
        events=events,
        observer=observer,
        maintenance=maintenance_for(prune_after_secs),
    )
    spec = RunSpec(
        max_jobs=max_jobs,
        deadline=deadline_from(deadline, max_secs),
        concurrency=concurrency,
        lease_secs=lease_secs,
        kinds=kinds or None,
        queues=queues or None,
        stop_grace_secs=stop_grace_secs,
    )
    return engine.run(spec, stop)
