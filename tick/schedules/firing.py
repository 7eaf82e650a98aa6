"""Firing (SPEC §15): a maintenance step of every tick that enqueues what is due.

Each due schedule is taken with `FOR UPDATE SKIP LOCKED` in a transaction of
its own. Its due fires are planned (`plan`, pure), then recorded in the
ledger, each enqueued fire's job inserted, and `next_fire_at` advanced, all
in one statement (`record_fires.sql`). A crash at any point rolls the whole
schedule back, and the ledger's primary key allows one row per fire time, so
any number of concurrent ticks enqueue each fire exactly once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from tick.budget import Budget
from tick.loaders import EARLIEST
from tick.report import ScheduleFire
from tick.schedules.times import HostFault, due_fires
from tick.statements import sql
from tick.trace_context import current
from tick.words import LIVE_STATES, FireStatus

if TYPE_CHECKING:
    import psycopg


# Bounds of one call: schedules taken, fires enqueued per schedule (SPEC §15),
# fires planned per schedule (missed ones included), and time.
SCHEDULES_PER_CALL = 1000
ENQUEUED_PER_SCHEDULE = 100
PLANNED_PER_SCHEDULE = 1000
BUDGET_SECS = 5.0


@dataclass(frozen=True, slots=True)
class Due:
    """A due schedule as firing needs it."""

    name: str
    cron: str
    timezone: str
    missed: str  # latest | all
    catchup_secs: int
    overlap: str  # allow | skip
    next_fire_at: datetime
    now: datetime
    previous_job_state: str | None  # the state of its last fire's job


@dataclass(frozen=True, slots=True)
class Plan:
    """What to record for one schedule now."""

    fires: list[tuple[datetime, FireStatus]]
    next_fire_at: datetime


def plan(due: Due) -> Plan:
    """The ledger rows of `due`'s fires in [next_fire_at, now], oldest first,
    and where `next_fire_at` goes. Fires older than `now - catchup_secs` are
    `missed`. Of the others, `all` enqueues each (at most 100 a call), and
    `latest` enqueues the newest and skips the rest. With `overlap = skip`,
    a fire while the previous job is PENDING or RUNNING is `overlap`.

    A `next_fire_at` before any instant Python holds (`-infinity` or a date
    BC written by plain SQL, read as `datetime.min`) has no fire times to
    count from: an `OverflowError`, and firing parks the schedule (SPEC §4.2,
    §15) rather than guess where it meant to start."""
    if due.next_fire_at <= EARLIEST:
        raise OverflowError("next_fire_at is before the year 1")
    found, following = due_fires(due.cron, due.timezone, due.next_fire_at, due.now,
                                 PLANNED_PER_SCHEDULE)
    horizon = due.now - timedelta(seconds=due.catchup_secs)
    missed = [f for f in found if f < horizon]
    window = [f for f in found if f >= horizon]
    complete = following > due.now  # every due fire is in `found`
    rows: list[tuple[datetime, FireStatus]] = [(f, "missed") for f in missed]
    if due.missed == "all":
        take, rest = window[:ENQUEUED_PER_SCHEDULE], window[ENQUEUED_PER_SCHEDULE:]
        rows += [(f, "enqueued") for f in take]
        if rest:  # the rest are for the next call
            following = rest[0]
    elif window:
        newest = window[-1]
        rows += [(f, "skipped") for f in window[:-1]]
        # Only the newest due fire is enqueued: when more are due than one
        # call plans, this one is not the newest and is skipped too.
        rows.append((newest, "enqueued" if complete else "skipped"))
    live = due.previous_job_state in LIVE_STATES
    if due.overlap == "skip":
        checked: list[tuple[datetime, FireStatus]] = []
        for fire_at, status in rows:
            if status == "enqueued":
                if live:
                    status = "overlap"
                live = True  # the job just planned is PENDING from now on
            checked.append((fire_at, status))
        rows = checked
    return Plan(rows, following)


@dataclass(slots=True)
class Fired:
    """What one firing call recorded."""

    enqueued: int = 0
    rows: list[ScheduleFire] = field(default_factory=list)
    lags: dict[str, float] = field(default_factory=dict)  # schedule -> seconds late
    parked: list[tuple[str, str]] = field(default_factory=list)  # (schedule, why)
    # Left due: this host cannot plan them (its time zone data), another may.
    unplanned: list[tuple[str, str]] = field(default_factory=list)  # (schedule, why)

    @property
    def fires(self) -> list[ScheduleFire]:
        """The ledger rows, as `tick.events.report_fires` reads them."""
        return self.rows

    def add(self, part: Fired) -> None:
        self.enqueued += part.enqueued
        self.rows += part.rows
        self.lags.update(part.lags)
        self.parked += part.parked
        self.unplanned += part.unplanned


# The share of a tick's time left that firing may take (SPEC §6: the jobs).
FIRING_SHARE = 0.25


def fire_due(conn: psycopg.Connection[Any], *, budget_secs: float = BUDGET_SECS,
             deadline: float | None = None,
             report: Callable[[Fired], None] | None = None) -> Fired:
    """Fire what is due, one schedule per transaction, within the bounds and
    the tick's `deadline` (a `time.monotonic()` instant): a schedule left
    due is the next pass's. `report` is given each schedule's part as soon
    as it is committed: the events of a thousand fires take time too, so a
    tick reports them inside the budget rather than after it."""
    done = Fired()
    if deadline is not None:
        # At most a quarter of what the tick has left: a schedule whose
        # next fire is far behind (a restored backup, a long outage) has
        # thousands of fires to record, and with its whole budget a tick of
        # 5 s ran no job at all. What is left, the next pass records.
        import time

        budget_secs = min(budget_secs, max((deadline - time.monotonic()) * FIRING_SHARE, 0.0))
    budget = Budget(budget_secs, deadline)
    capped: list[str] = []
    for _ in range(SCHEDULES_PER_CALL):
        if not budget.room():
            break
        part = Fired()
        with conn.transaction():
            row = conn.execute(sql("take_due_schedule"), {"capped": capped}).fetchone()
            if row is None:
                break
            due = Due(*row)
            try:
                todo = plan(due)
            except HostFault as error:
                # This host's time zone data, not the row: parking it would
                # stop it on every host for good. Left due for a host that
                # can plan it; not taken again by this call.
                part.unplanned.append((due.name, f"{type(error).__name__}: {error.reason}"))
                capped.append(due.name)
                todo = None
            except Exception as error:  # a row written past add's checks
                conn.execute(sql("park_schedule"), {"name": due.name})
                part.parked.append((due.name, type(error).__name__))
                todo = None
            if todo is not None:
                recorded = conn.execute(sql("record_fires"), {
                    "name": due.name,
                    "fire_ats": [f for f, _ in todo.fires],
                    "statuses": [s for _, s in todo.fires],
                    "next_fire_at": todo.next_fire_at,
                    "trace": current(),  # the firing run's span (SPEC §21)
                }).fetchall()
        if todo is not None:
            if sum(1 for _, status in todo.fires if status == "enqueued") \
                    >= ENQUEUED_PER_SCHEDULE:
                capped.append(due.name)
            for fire_at, status, job_id in recorded:
                part.rows.append(ScheduleFire(due.name, fire_at, status, job_id))
                if status == "enqueued":
                    part.enqueued += 1
                    part.lags[due.name] = max((due.now - fire_at).total_seconds(), 0.0)
        done.add(part)
        if report is not None:
            report(part)
        budget.spent()
    return done
