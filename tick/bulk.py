"""Operator actions on many jobs at once (SPEC §22): `awc retry`, `awc
cancel` and `awc jobs discard` with several ids or a filter, and the
console's bulk actions (SPEC §19) share what is here.

A filter is bounded as the console's is: the candidates are read through
the partial indexes of their states, at most `BULK_CAP` of them, and one
action changes at most those, by id, in one statement; what is left, the
operator runs again for. Every statement re-checks the state, so a job that
moved on in between is left as it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from tick.statements import sql
from tick.words import DEAD_STATES, FINISHED_STATES, LIVE_STATES, JobState

T = TypeVar("T")

if TYPE_CHECKING:
    import psycopg

BULK_CAP = 10_000
# The states each action applies to (SPEC §4.2, §22).
ACTION_STATES: dict[str, tuple[JobState, ...]] = {  # one entry per tick.words.JOB_ACTIONS
    "retry": DEAD_STATES,
    "cancel": LIVE_STATES,
    "discard": FINISHED_STATES,
}
_STATEMENTS = {"retry": "revive_jobs", "cancel": "cancel_jobs", "discard": "discard_jobs"}


@dataclass(frozen=True, slots=True)
class Selection:
    """The jobs an operator named: ids, or a filter (each part optional;
    `older_secs` is compared with finished_at for final jobs, created_at for
    the others)."""

    ids: tuple[int, ...] = ()
    state: str | None = None
    kind: str | None = None
    queue: str | None = None
    older_secs: float | None = None

    def described(self) -> dict[str, Any]:
        """The ids or the filter, for the audit's detail."""
        if self.ids:
            return {"ids": list(self.ids)}
        where = {"state": self.state, "kind": self.kind, "queue": self.queue,
                 "older_than_secs": self.older_secs}
        return {"filter": {k: v for k, v in where.items() if v is not None}}

    def states(self, action: str) -> list[str]:
        """The states the action reads: its own, narrowed by `state`."""
        eligible = ACTION_STATES[action]
        if self.state is None:
            return list(eligible)
        return [self.state] if self.state in eligible else []


def candidates(conn: psycopg.Connection[Any], action: str, selection: Selection,
               cap: int = BULK_CAP) -> list[int]:
    """The ids the action would touch now, at most `cap` of them."""
    states = selection.states(action)
    if not states:
        return []
    if selection.ids:
        rows = conn.execute(sql("listed_jobs"), {"ids": list(selection.ids),
                                                 "states": states}).fetchall()
    else:
        rows = conn.execute(sql("console_bulk_candidates"), {
            "states": states, "kind": selection.kind, "queue": selection.queue,
            "older_secs": selection.older_secs, "cap": cap}).fetchall()
    return [int(r[0]) for r in rows][:cap]


def change(conn: psycopg.Connection[Any], action: str, ids: list[int]) -> int:
    """Do `action` to those of `ids` still in a state it applies to; how many.
    Call it inside a transaction: a retry is three statements (`revive`)."""
    if not ids:
        return 0
    if action == "retry":
        return revive(conn, ids)
    if action == "discard":
        conn.execute(sql("lock_discarded"), {"ids": ids}).fetchall()
    row = conn.execute(sql(_STATEMENTS[action]), {"ids": ids}).fetchone()
    return int(row[0]) if row else 0


# How many times an operator's transaction runs when PostgreSQL ends it to
# break a deadlock with a tick's round trip (lock_revived_parents.sql).
DEADLOCK_TRIES = 3


def in_transaction(conn: psycopg.Connection[Any], work: Callable[[], T]) -> T:
    """`work` in a transaction of its own, run again when PostgreSQL ended it
    to break a deadlock (nothing of it was kept): a retry's locks on parents
    meet a tick's round trip, which may hold one parent while it waits for
    another. The operator saw `DeadlockDetected` and had to run the command
    again."""
    from psycopg.errors import DeadlockDetected

    for attempt in range(DEADLOCK_TRIES):
        try:
            with conn.transaction():
                return work()
        except DeadlockDetected:
            if attempt == DEADLOCK_TRIES - 1:
                raise
    raise AssertionError("unreachable")


def revive(conn: psycopg.Connection[Any], ids: list[int]) -> int:
    """Send those of `ids` that are FAILED or CANCELLED back to PENDING, in
    the caller's transaction; how many. Their descendants are revived once
    for all of them (not once a revived job: a fan-in's child would count
    each parent by an update of its row), and then each PENDING job among
    them and their children waits for exactly its parents not final now:
    one statement reviving a job and its parent counted the parent twice,
    or not at all (SPEC §20, decision 0033)."""
    # First the parents not final of every job it may revive: an outcome
    # committed meanwhile passed a child it saw still CANCELLED by.
    conn.execute(sql("lock_revived_parents"), {"ids": ids}).fetchall()
    row = conn.execute(sql("revive_jobs"), {"ids": ids}).fetchone()
    assert row is not None  # an aggregate: one row
    count, _, revived = row
    # Always: it also clears the revive's setting for the rest of the transaction.
    conn.execute(sql("revive_descendants"), {"ids": revived}).fetchall()
    if revived:
        conn.execute(sql("recount_waiting"), {"ids": revived}).fetchall()
    return int(count)


def audit(conn: psycopg.Connection[Any], event: str, subject: str,
          detail: dict[str, Any] | None = None) -> None:
    """One row of `awc.audit_events` (SPEC §19, §22), in the caller's transaction."""
    conn.execute(sql("console_audit"), {
        "event": event, "subject": subject,
        "detail": None if detail is None else json.dumps(detail, ensure_ascii=False)})


def apply(conn: psycopg.Connection[Any], action: str, selection: Selection,
          cap: int = BULK_CAP) -> int:
    """`awc retry|cancel|jobs discard ... --yes`: the action on the jobs the
    selection matches now (at most `cap`), audited as `cli.<action>` with the
    ids or the filter and the count, in one transaction."""
    def once() -> int:
        ids = candidates(conn, action, selection, cap)
        changed = change(conn, action, ids)
        audit(conn, f"cli.{action}", "jobs", {**selection.described(), "count": changed})
        return changed

    return in_transaction(conn, once)
