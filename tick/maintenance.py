"""Maintenance (SPEC §7.3): rescue expired leases and prune finished jobs
(and dead letters past AWC_DEAD_LETTER_RETENTION_SECS, SPEC §22).

Each step is bounded (a LIMIT per call) and runs in its own transaction under
`pg_try_advisory_xact_lock`, so concurrent ticks skip a step another process
is running instead of queueing behind it. Neither step depends on which
handlers this process registered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tick.budget import Budget
from tick.history import TickStart
from tick.report import ScheduleFire
from tick.statements import sql

if TYPE_CHECKING:
    import psycopg

    from tick.schedules.firing import Fired

# Advisory lock keys, one per step ('awc' 'res' / 'awc' 'pru' in ASCII).
RESCUE_LOCK_KEY = 0x617763_726573
PRUNE_LOCK_KEY = 0x617763_707275

RESCUE_LIMIT = 1000
PRUNE_BATCH = 5000
PRUNE_MAX_BATCHES = 20
PRUNE_EVERY_SECS = 3600
# SPEC §24: a first claim starts from the last run's cursor only while its
# probe for jobs made ready since reads at most this many enqueued since
# (a few milliseconds); past it, a walk from the index's start costs less
# unless the horizon is pinned, which this pass cannot tell.
SEED_MOST_JOBS = 20_000
DEFAULT_SCHEDULE_HISTORY_SECS = 2592000  # AWC_SCHEDULE_HISTORY_SECS's default: 30 days


@dataclass(frozen=True, slots=True)
class MaintenanceResult:
    """What one maintenance pass did."""

    rescued: int = 0
    rescued_failed: int = 0
    pruned: int = 0
    fired: int = 0  # schedule fires enqueued (SPEC §15)
    # Every ledger row this pass recorded: (schedule, fire_at, status, job_id).
    fires: tuple[ScheduleFire, ...] = ()
    lags: tuple[tuple[str, float], ...] = ()  # schedule -> how late its last fire was
    parked: tuple[tuple[str, str], ...] = ()  # schedules that could not be planned, and why
    # schedules this host could not plan (its time zone data), left due
    unplanned: tuple[tuple[str, str], ...] = ()
    tick_id: int | None = None  # the history row this pass inserted (SPEC §16)
    # why the prune failed, if it did (`awc:` text): the pass went on without it
    prune_error: str | None = None
    # SPEC §24: the cursor the last run left (claim_seed.sql's row), if any
    seed: tuple[Any, ...] | None = None
    # SPEC §23: the fair claim's key cursor the last run left, if any
    key_seed: str | None = None
    # A job may be ready now (ready_any.sql), or a schedule fired: False
    # lets a tick with nothing to do end without its claim (decision 0040)
    ready: bool = True


def _try_lock(conn: psycopg.Connection[Any], key: int) -> bool:
    row = conn.execute(sql("try_lock"), {"key": key}).fetchone()
    return bool(row and row[0])


def rescue(conn: psycopg.Connection[Any], limit: int = RESCUE_LIMIT) -> tuple[int, int]:
    """Return expired RUNNING jobs to PENDING (or FAILED when spent).

    Returns (rescued to PENDING, moved to FAILED); (0, 0) when another process
    holds the rescue lock.
    """
    rescued, failed, *_ = _rescue(conn, limit, None)
    return rescued, failed


def _rescue(
    conn: psycopg.Connection[Any], limit: int, start: TickStart | None
) -> tuple[int, int, bool, int | None, bool, tuple[Any, ...] | None, str | None, bool]:
    """`rescue`, whether a schedule is due, the id of the history row
    inserted for `start`, whether the prune is due, and the cursor the last
    run left for the first claim (SPEC §24) and its key cursor (§23), and
    whether a job may be ready after the rescue: the lock, the questions
    and the rescue are sent in one exchange, so a tick pays no extra round
    trip for schedules, history, the prune check or its cursor (SPEC §15,
    §16)."""
    from tick.db import one_exchange

    with one_exchange(conn):  # the lock, the checks and the rescue: one turn
        conn.execute(sql("quiet_commit"))  # redone by the next pass if lost
        conn.execute(sql("try_lock"), {"key": RESCUE_LOCK_KEY})
        schedules = conn.execute(sql("schedules_due"))
        opened = conn.execute(sql("open_tick"), start.params()) if start else None
        prune = conn.execute(sql("prune_due"), {"every_secs": PRUNE_EVERY_SECS})
        seed = conn.execute(sql("claim_seed"), {"most": SEED_MOST_JOBS})
        key_seed = conn.execute(sql("claim_key_seed"))
        conn.execute(sql("pin_plans"))
        rescue = conn.execute(sql("rescue_jobs"), {"limit": limit, "key": RESCUE_LOCK_KEY})
        ready = conn.execute(sql("ready_any"))
    due = schedules.fetchone()
    tick = opened.fetchone() if opened is not None else None
    prune_due = prune.fetchone()
    seeded = seed.fetchone()
    key_row = key_seed.fetchone()
    rows = rescue.fetchall()
    maybe = ready.fetchone()
    failed = sum(1 for _, state in rows if state == "FAILED")
    return (len(rows) - failed, failed, bool(due and due[0]), tick[0] if tick else None,
            bool(prune_due and prune_due[0]), None if seeded is None else tuple(seeded),
            None if key_row is None else key_row[0], bool(maybe is None or maybe[0]))


def prune(
    conn: psycopg.Connection[Any],
    after_secs: float,
    *,
    force: bool = False,
    budget_secs: float = 5.0,
    ledger_after_secs: float | None = None,
    ticks_after_secs: float | None = None,
    dead_after_secs: float | None = None,
    deadline: float | None = None,
) -> int:
    """Empty the oldest finished part when retention allows (tick/parts.py),
    delete the COMPLETED jobs left in the hot table by an older awc or by
    hand and CANCELLED jobs finished over `after_secs` ago,
    FAILED ones finished over `dead_after_secs` ago (SPEC §22: None keeps
    them), and schedule ledger rows recorded over `ledger_after_secs` ago
    (SPEC §15: by their own setting, never by job pruning). Returns the jobs
    deleted.

    Runs at most once an hour across all processes (the mark in
    `awc.maintenance`), unless `force` (the operator's `awc prune`). A pass is
    bounded by batches, `budget_secs` and the tick's `deadline` (a
    `time.monotonic()` instant); a pass cut short leaves the mark alone, so
    the next tick carries on where it stopped.
    """
    from tick.parts import rotate

    budget = Budget(budget_secs, deadline)
    deleted = 0
    if not budget.room():
        return 0  # the tick's time is up: not even the lock
    # Completed jobs go by whole parts (SPEC §24), in transactions of their
    # own so a TRUNCATE's lock is held for milliseconds, not for the pass.
    deleted += rotate(conn, after_secs, PRUNE_LOCK_KEY) or 0
    with conn.transaction():
        if not _try_lock(conn, PRUNE_LOCK_KEY):
            return 0
        if not force:
            due = conn.execute(sql("prune_due"), {"every_secs": PRUNE_EVERY_SECS}).fetchone()
            if not due or not due[0]:
                return 0
        conn.execute(sql("pin_plans"))
        finished = False
        for _ in range(PRUNE_MAX_BATCHES):
            if not budget.room():
                break
            cur = conn.execute(sql("prune_jobs"), {"after_secs": after_secs, "limit": PRUNE_BATCH})
            budget.spent()
            deleted += cur.rowcount
            if cur.rowcount < PRUNE_BATCH:
                finished = True
                break
        # Dead letters by their own retention (§22), then the ledgers, each
        # by its own setting, never by job pruning (§15, §16), and the rate
        # limits' claims by their limits' windows (§18, §23).
        for statement, after in (("prune_dead_letters", dead_after_secs),
                                 ("prune_schedule_fires", ledger_after_secs),
                                 ("prune_ticks", ticks_after_secs),
                                 ("prune_limit_claims", 0.0)):
            if not finished or after is None:
                continue
            finished = False
            for _ in range(PRUNE_MAX_BATCHES):
                if not budget.room():
                    break
                cur = conn.execute(sql(statement), {"after_secs": after, "limit": PRUNE_BATCH})
                budget.spent()
                if statement == "prune_dead_letters":
                    deleted += cur.rowcount
                if cur.rowcount < PRUNE_BATCH:
                    finished = True
                    break
        if finished:
            # SPEC §17: journals their walk's verdict did not delete (0024).
            conn.execute(sql("prune_walk_marks"), {"limit": PRUNE_BATCH})
            conn.execute(sql("prune_done"))
    return deleted


def run_maintenance(
    conn: psycopg.Connection[Any],
    prune_after_secs: float,
    *,
    prune_budget_secs: float = 5.0,
    schedule_history_secs: float = DEFAULT_SCHEDULE_HISTORY_SECS,
    tick_history_secs: float | None = None,
    dead_letter_secs: float | None = None,
    start: TickStart | None = None,
    deadline: float | None = None,
    report: Callable[[Fired], None] | None = None,
) -> MaintenanceResult:
    """One bounded pass: rescue, fire the schedules that are due, then prune
    when due. A tick's `deadline` (a `time.monotonic()` instant) bounds the
    firing and the prune as it bounds the claims (SPEC §6): what is left
    undone, the next pass does. `report`, if given, receives each
    schedule's fires as they are recorded (`fire_due`), inside that bound."""
    rescued, rescued_failed, due, tick_id, prune_due, seed, key_seed, ready = _rescue(
        conn, RESCUE_LIMIT, start)
    ready = ready or due  # the jobs it fires are enqueued after the probe
    fired = None
    if due:
        from tick.schedules.firing import fire_due

        fired = fire_due(conn, deadline=deadline, report=report)
    pruned, prune_error = 0, None
    if prune_due:  # asked again under the prune's lock: another process may be at it
        try:
            pruned = prune(conn, prune_after_secs, budget_secs=prune_budget_secs,
                           ledger_after_secs=schedule_history_secs,
                           ticks_after_secs=tick_history_secs, dead_after_secs=dead_letter_secs,
                           deadline=deadline)
        except Exception as error:
            # Housekeeping, never on the claim's path: a prune the server
            # refuses (temp_file_limit, out of shared memory for its locks)
            # ended every tick before its claim while it stayed due. A lost
            # connection is the run's to ride out.
            from tick.db import database_error, session_lost

            if session_lost(conn, error):
                raise
            prune_error = str(database_error(error, None, "pruning", conn))
    if fired is None:
        return MaintenanceResult(rescued=rescued, rescued_failed=rescued_failed, pruned=pruned,
                                 tick_id=tick_id, seed=seed, key_seed=key_seed,
                                 prune_error=prune_error, ready=ready)
    return MaintenanceResult(rescued=rescued, rescued_failed=rescued_failed, pruned=pruned,
                             fired=fired.enqueued, fires=tuple(fired.rows),
                             lags=tuple(fired.lags.items()), parked=tuple(fired.parked),
                             unplanned=tuple(fired.unplanned),
                             tick_id=tick_id, seed=seed, key_seed=key_seed,
                             prune_error=prune_error, ready=ready)
