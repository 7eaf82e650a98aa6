"""Tick history (SPEC §16): a row in `awc.ticks` for every run of the engine,
so an operator can answer "did the 03:00 run happen, and what did it do?".

A tick's row is inserted by the statement that takes the rescue lock, the
first one every tick sends (`rescue_lock.sql`), and completed with its report
once the run is over, or with its `awc:` error. A row left unfinished past
its deadline is a tick that died. The loop writes one whole row per busy
stretch, and at most one per maintenance interval while idle.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from tick.statements import sql

if TYPE_CHECKING:
    import psycopg

    from tick.engine.report import TickReport
    from tick.events import EventSink

COUNTS = ("claimed", "completed", "retried", "failed", "cancelled", "released", "discarded",
          "rescued", "pruned", "fired")


@dataclass(frozen=True, slots=True)
class TickStart:
    """Who is ticking: what the row says before the tick has done anything."""

    driver: str  # tick | loop | lambda | maintenance
    worker_id: str
    correlation_id: str | None = None
    deadline_at: datetime | None = None

    def params(self) -> dict[str, Any]:
        return {"driver": self.driver, "worker_id": self.worker_id[:200],
                "correlation_id": None if self.correlation_id is None
                else self.correlation_id[:200], "deadline_at": self.deadline_at}


NO_START: dict[str, Any] = {"driver": None, "worker_id": None, "correlation_id": None,
                            "deadline_at": None}


def wall_deadline(monotonic_deadline: float | None) -> datetime | None:
    """A `time.monotonic()` deadline as a UTC instant."""
    import time

    if monotonic_deadline is None:
        return None
    return datetime.now(UTC) + timedelta(seconds=monotonic_deadline - time.monotonic())


def _counts(report: TickReport | None) -> dict[str, Any]:
    if report is None:
        return {name: 0 for name in COUNTS} | {"stop_reason": None}
    return {name: getattr(report, name) for name in COUNTS} | {
        "stop_reason": report.stop_reason}


def finish(conn: psycopg.Connection[Any], tick_id: int, report: TickReport | None,
           error: str | None = None) -> None:
    """Complete the tick's row with its report, or its error."""
    conn.execute(sql("finish_tick"), {"id": tick_id, "error": error, **_counts(report)})


def finish_quietly(conn: psycopg.Connection[Any], tick_id: int, report: TickReport,
                   events: EventSink) -> None:
    """`finish`, as the end of a run does it: the jobs are recorded already,
    so a failure here is a warning event, never the run's failure."""
    try:
        finish(conn, tick_id, report)
    except Exception as error:
        events.log("warning", "tick_history_failed", error=type(error).__name__)


def record(conn: psycopg.Connection[Any], start: TickStart, report: TickReport | None,
           *, started_at: datetime | None = None, error: str | None = None) -> None:
    """Write a whole row: a loop's stretch or idle interval, or a failed tick
    that had no row yet."""
    conn.execute(sql("record_tick"), {**start.params(), "started_at": started_at,
                                      "error": error, **_counts(report)})


def ticks(conn: psycopg.Connection[Any], *, driver: str | None = None,
          since: datetime | None = None, failed: bool = False,
          limit: int = 50) -> list[dict[str, Any]]:
    """The history, newest first; each row says whether it `died`."""
    cur = conn.execute(sql("list_ticks"), {"driver": driver, "since": since, "failed": failed,
                                           "limit": limit})
    columns = [c.name for c in cur.description or ()]
    return [dict(zip(columns, row, strict=True)) for row in cur.fetchall()]


def last_ticks(conn: psycopg.Connection[Any]) -> dict[str, dict[str, Any]]:
    """Per driver, the last tick that finished: when, how long ago, how it ended."""
    out = {}
    for driver, finished_at, age, stop_reason, error in conn.execute(sql("last_ticks")):
        out[driver] = {"finished_at": finished_at, "age_s": round(float(age), 3),
                       "stop_reason": stop_reason, "error": error}
    return out
