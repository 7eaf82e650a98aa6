"""Tick history (SPEC §16): a row in `awc.ticks` for every run of the engine,
so an operator can answer "did the 03:00 run happen, and what did it do?".

A tick's row is inserted in the exchange that takes the rescue lock, the
first one every tick sends (`open_tick.sql`), and completed with its report
by the last statement of the round trip that may end it (`closing`): the one
whose claim, if it comes back empty, leaves nothing running. If the run then
ended otherwise than that statement foresaw (its claim took jobs, a fence
refused an outcome, a stop came), the row is completed once more after the
run, off the hot path; a failed run's row gets its `awc:` error. A row left
unfinished past its deadline is a tick that died. The loop opens a row for
each busy stretch in the round trip of its first claim (`opening`), keeps
pushing its deadline back while it runs (`renew`: a lease on the row), and
completes it the same way, so a loop killed mid-stretch leaves a row that
shows it died; while idle it writes at most one row per maintenance interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tick.report import COUNTERS, TickReport
from tick.statements import sql

if TYPE_CHECKING:
    import psycopg


@dataclass(frozen=True, slots=True)
class TickStart:
    """Who is ticking: what the row says before the tick has done anything."""

    driver: str  # one of tick.words.DRIVERS
    worker_id: str
    correlation_id: str | None = None
    deadline: float | None = None  # a time.monotonic() instant
    # The row's key (a uuid): an opening sent again returns the row the
    # first wrote (open_tick.sql). One per run; a loop's stretches have none.
    row_key: str | None = None

    def params(self) -> dict[str, Any]:
        """The row's columns. Its deadline is sent as the time left and made
        an instant by the database (`now() + left`): `awc ticks` says a row
        died by comparing it with the database's clock, so an instant from
        a host whose clock is behind would show a running tick as died."""
        import time

        return {"driver": self.driver, "worker_id": self.worker_id[:200],
                "correlation_id": None if self.correlation_id is None
                else self.correlation_id[:200],
                "deadline_secs": None if self.deadline is None
                else self.deadline - time.monotonic(), "row_key": self.row_key}


# A statement for the end of a round trip: its name and parameters.
Tail = tuple[str, dict[str, Any]]
# finish_tick's and record_tick's cursor parameters when a run leaves none
# (SPEC §24: a claimer's cursor, where the next process starts; cursor.py).
NO_SEED: dict[str, Any] = dict.fromkeys(("seed_p", "seed_r", "seed_i", "seed_xmax", "seed_xip",
                                         "rewind_p", "rewind_r", "rewind_i", "rewind_in",
                                         "key_after"))


def counts(report: TickReport | None, error: str | None = None) -> dict[str, Any]:
    """The report as the row's columns; a failed run's has no stop reason (it
    did not stop, it failed), and keeps the counts it had."""
    if report is None:
        return {name: 0 for name in COUNTERS} | {"stop_reason": None}
    return {name: getattr(report, name) for name in COUNTERS} | {
        "stop_reason": None if error is not None else report.stop_reason}


def finish(conn: psycopg.Connection[Any], tick_id: int, report: TickReport | None,
           error: str | None = None) -> None:
    """Complete the tick's row with its report, or its error."""
    conn.execute(sql("finish_tick"), {"id": tick_id, "error": error, "slots": [],
                                      **counts(report, error), **NO_SEED})


def closing(tick_id: int | None, start: TickStart | None, report: TickReport,
            slots: list[str], *, ran_secs: float | None = None,
            seed: dict[str, Any] | None = None) -> Tail:
    """The statement that ends a run's row if the claim sent with it (for
    `slots`) comes back empty: a tick's row completed, or a loop stretch's
    row written whole (`start`; it began `ran_secs` ago, on the database's
    clock). It returns a row if it did. `seed`: the claimer's cursor, left
    on the row for the next process (SPEC §24, Cursor.left)."""
    left = NO_SEED if seed is None else seed
    if tick_id is not None:
        return "finish_tick", {"id": tick_id, "error": None, "slots": slots, **counts(report),
                               **left}
    assert start is not None
    return "record_tick", {**start.params(), "ran_secs": ran_secs, "error": None,
                           "slots": slots, **counts(report), **left}


def opening(start: TickStart, slots: list[str], lease_secs: float) -> Tail:
    """The statement that opens a loop stretch's row if the claim sent with
    it (for `slots`) takes a job: the stretch began. It returns the row's id."""
    return "open_stretch", {**start.params(), "slots": slots, "lease_secs": lease_secs}


def renew(conn: psycopg.Connection[Any], tick_id: int, lease_secs: float) -> None:
    """Push back the deadline of a running stretch's row: it has not died."""
    conn.execute(sql("renew_tick"), {"id": tick_id, "lease_secs": lease_secs})


def record(conn: psycopg.Connection[Any], start: TickStart, report: TickReport | None,
           *, error: str | None = None) -> None:
    """Write a whole row: a failed tick that had no row yet."""
    conn.execute(sql("record_tick"), {**start.params(), "ran_secs": None, "error": error,
                                      "slots": [], **counts(report, error), **NO_SEED})


def ticks(conn: psycopg.Connection[Any], *, driver: str | None = None,
          since: datetime | None = None, failed: bool = False,
          limit: int = 50) -> list[dict[str, Any]]:
    """The history, newest first; each row says whether it `died`."""
    cur = conn.execute(sql("list_ticks"), {"driver": driver, "since": since, "failed": failed,
                                           "limit": limit})
    columns = [c.name for c in cur.description or ()]
    return [dict(zip(columns, row, strict=True)) for row in cur.fetchall()]


def last_ticks(conn: psycopg.Connection[Any]) -> dict[str, dict[str, Any]]:
    """Per driver, the last tick that finished (when, how long ago: None for
    a `-infinity` written by plain SQL; how it ended) and the last that
    succeeded: `success_age_s` is what to alert on, since a tick failing every
    minute keeps `age_s` small (SPEC §16)."""
    out = {}
    for driver, finished_at, age, stop_reason, error, ok_at, ok_age in conn.execute(
            sql("last_ticks")):
        out[driver] = {"finished_at": finished_at,
                       "age_s": None if age is None else round(float(age), 3),
                       "stop_reason": stop_reason, "error": error,
                       "last_success_at": ok_at,
                       "success_age_s": None if ok_age is None else round(float(ok_age), 3)}
    return out
