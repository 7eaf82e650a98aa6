"""Waiting for jobs (SPEC §20): a producer's `wait` for one job's outcome,
and a running job's view of its parents.

`wait` LISTENs on `awc_final` and marks the job as waited for; the
completion statement sends the ids of the marked jobs it completed (one
notification per statement, none when no job of it is waited for) and a
trigger one per failure or cancel. It reads the job only when its id
arrives; a poll every few seconds covers a notification lost (a connection
that dropped, a LISTEN that began after the job finished).
"""

from __future__ import annotations

import json
import math
import numbers
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from tick.errors import JobNotFound
from tick.loaders import shown_json
from tick.statements import sql

if TYPE_CHECKING:
    import psycopg

FINAL_CHANNEL = "awc_final"
FINAL_STATES = ("COMPLETED", "FAILED", "CANCELLED")
POLL_SECS = 5.0  # the fallback's interval: a lost notification costs at most this
PARENTS_PAGE = 1000


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """A final job's outcome: its state, its handler's result (COMPLETED),
    and its last error (FAILED or CANCELLED, else None)."""

    state: str
    result: Any
    last_error: str | None
    # The result as stored (JSON text) when it is nested deeper than Python's
    # decoder goes (about 1,000 levels; a writer in plain SQL can store one):
    # `result` is then None. None otherwise.
    result_too_deep: str | None = None


class ParentJob(NamedTuple):
    """One parent of a running job, as `ctx.parents()` yields it: `result`
    decoded, or its JSON text (a str) when nested deeper than Python's
    decoder goes. A parent deleted since the child was declared (retention,
    or a discard, while the child was final and not yet retried) has state
    `DELETED` and no kind or result."""

    id: int
    kind: str | None
    state: str
    result: Any


def _outcome(conn: psycopg.Connection[Any], job_id: int) -> JobOutcome | None:
    row = conn.execute(sql("job_outcome"), {"id": job_id}).fetchone()
    if row is None:
        raise JobNotFound(f"job {job_id} does not exist")
    state, result, last_error = row
    if state not in FINAL_STATES:
        return None
    if state == "COMPLETED":  # an earlier run's error stays on the row, not in the outcome
        last_error = None
    if result is None:
        return JobOutcome(str(state), None, last_error)
    try:
        return JobOutcome(str(state), json.loads(result), last_error)
    except RecursionError:
        return JobOutcome(str(state), None, last_error, result_too_deep=result)


def wait(conn: psycopg.Connection[Any], job_id: int, timeout_secs: float,
         *, poll_secs: float = POLL_SECS) -> JobOutcome:
    """Return once job `job_id` is final (SPEC §20); `TimeoutError` when
    `timeout_secs` pass first, `JobNotFound` if there is no such job.

    On an autocommit connection it LISTENs for the job's final notification
    (and UNLISTENs before returning, unless the caller was listening on that
    channel already); notifications of other channels (and, to a caller
    listening on it, of that one) that arrive meanwhile are kept for the
    caller's `conn.notifies()` or notify handlers. Inside a transaction,
    where a LISTEN would wait for the commit, it polls every `poll_secs`:
    a READ COMMITTED transaction only (in a REPEATABLE READ or SERIALIZABLE
    one the job's outcome could never be seen: a `ValueError`). An infinite
    timeout waits as long as it takes; NaN is refused (no deadline compares
    with it, and the wait would poll without pause). On a connection awc
    opened (`tick.db.connect`), a server that stops answering ends the wait
    by its deadline and a grace of 2 s: `tick.watchdog.NoAnswer` (an
    `OperationalError`), the connection closed."""
    # True is an int to Python, not to the database; an integer of another
    # type (numpy's) is read as the int it is.
    if isinstance(job_id, bool) or not isinstance(job_id, numbers.Integral):
        raise TypeError(f"wait: job_id must be an int, not {type(job_id).__name__}")
    job_id = int(job_id)
    if math.isnan(timeout_secs) or not poll_secs > 0 or math.isinf(poll_secs):
        raise ValueError("wait: timeout_secs must be a number (inf: no deadline) and "
                         "poll_secs a finite number above 0")
    end = time.monotonic() + max(timeout_secs, 0.0)
    # A silent server (one that keeps its socket open and answers nothing)
    # must not hold the caller past the deadline it asked for: on an awc
    # connection every exchange of the wait ends by then, the watchdog's
    # grace added (tick.watchdog, SPEC §3).
    from tick.watchdog import DEADLINE_GRACE_SECS, answering_by

    with answering_by(conn, None if math.isinf(end) else end + DEADLINE_GRACE_SECS):
        return _wait(conn, job_id, timeout_secs, end, poll_secs)


def _wait(conn: psycopg.Connection[Any], job_id: int, timeout_secs: float, end: float,
          poll_secs: float) -> JobOutcome:
    listening = conn.autocommit
    if not listening:
        row = conn.execute("SELECT current_setting('transaction_isolation')").fetchone()
        if row is not None and row[0] in ("repeatable read", "serializable"):
            # One snapshot for the whole transaction: the poll would read the
            # job as it was, for ever (and hold the horizon meanwhile).
            raise ValueError(f"wait: inside a {str(row[0]).upper()} transaction the job's "
                             "outcome can never be seen; wait on an autocommit connection")
    ours = False  # whether this wait began the LISTEN (a caller's own stays)
    kept: list[Any] = []  # the caller's notifications, handed back at the end
    if listening:
        row = conn.execute("SELECT %s = ANY (ARRAY(SELECT pg_listening_channels()))",
                           (FINAL_CHANNEL,)).fetchone()
        ours = not (row and row[0])
        if ours:
            conn.execute(f"LISTEN {FINAL_CHANNEL}")
    try:
        if listening:  # marked as waited for, or its completion announces nothing
            conn.execute(sql("mark_waited"), {"id": job_id})
        # Listening and marked first, then reading: a job that becomes final
        # before the mark is seen by the read, after it is announced.
        wanted = str(job_id)
        while True:
            outcome = _outcome(conn, job_id)
            if outcome is not None:
                return outcome
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"job {job_id} was not final within {timeout_secs:g}s")
            nap = min(left, poll_secs)
            if not listening:
                time.sleep(nap)
                continue
            until = time.monotonic() + nap
            while (rest := until - time.monotonic()) > 0:
                got = list(conn.notifies(timeout=rest, stop_after=1))
                kept.extend(n for n in got if n.channel != FINAL_CHANNEL or not ours)
                if any(n.channel == FINAL_CHANNEL and heard(n.payload, wanted) for n in got):
                    break
    finally:
        if ours and not conn.closed:
            conn.execute(f"UNLISTEN {FINAL_CHANNEL}")
        _hand_back(conn, kept)


def _hand_back(conn: psycopg.Connection[Any], kept: list[Any]) -> None:
    """The notifications the wait read that were not its own, to where the
    caller reads them: the backlog its next `conn.notifies()` yields first
    (psycopg keeps no public way to put one back: a version without that
    backlog loses them, as before). A caller's notify handlers were called
    by psycopg as each arrived: nothing to hand back then."""
    if not kept or getattr(conn, "_notify_handlers", None):
        return
    backlog = getattr(conn, "_notifies_backlog", None)
    if backlog is not None:
        backlog.extend(kept)


def heard(payload: str, wanted: str) -> bool:
    """Whether an `awc_final` payload may be about job `wanted`: one id (a
    failure or cancel), the ids of a completion statement joined by commas,
    or empty (too many to list: every waiter looks again)."""
    return payload == "" or wanted in payload.split(",")


def parents(conn: psycopg.Connection[Any], job_id: int,
            page: int = PARENTS_PAGE) -> Iterator[ParentJob]:
    """The parents of job `job_id` in id order, read `page` at a time."""
    after = 0
    while True:
        rows = conn.execute(sql("parents_page"),
                            {"child": job_id, "after": after, "page": page}).fetchall()
        for pid, kind, state, result in rows:
            # Too deep to decode: its JSON text, as the operator commands show it.
            yield ParentJob(int(pid), None if kind is None else str(kind), str(state),
                            None if result is None else shown_json(result))
        if len(rows) < page:
            return
        after = int(rows[-1][0])
