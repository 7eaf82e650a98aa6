"""The run's row of the tick history (SPEC §16), as the coordinator keeps it.

A tick's row was inserted by its maintenance statement; a loop's busy
stretch's row by the round trip of its first claim (`opening`), its deadline
pushed back while it runs (`keep_alive`), so a killed loop's stretch shows it
died. Either is ended by the last statement of the round trip
that may end the run (`foresee`), guarded on that round trip's claim coming
back empty, so keeping the history costs no round trip of its own. If the
run then ended otherwise than foreseen, `close` writes what happened, off
the hot path. Coordinator thread only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tick.engine.flush import Flush, foreseen
from tick.history import Tail, closing, counts, opening, renew
from tick.statements import sql

if TYPE_CHECKING:
    import psycopg

    from tick.engine.claims import Claims
    from tick.engine.spec import RunSpec
    from tick.events import EventSink
    from tick.queue import ClaimRequest
    from tick.report import TickReport
    from tick.words import StopReason


class HistoryRow:
    """The history row of one run (a loop: of its current stretch)."""

    def __init__(self, spec: RunSpec, seed: Callable[[float], dict[str, Any]]) -> None:
        self.spec = spec
        # The claimer's cursor as the row leaves it for the next process
        # (SPEC §24: Claims.left).
        self.seed = seed
        # A tick's row, inserted by its maintenance; a loop's open stretch's
        # row, inserted by the round trip of the stretch's first claim.
        self.tick_id: int | None = None
        # What a round trip's closing statement wrote, to be corrected if the
        # run ended otherwise.
        self.closed: dict[str, Any] | None = None
        self.renew_at = math.inf  # when the open stretch's row is due a renewal

    def opening(self, claim: ClaimRequest | None) -> Tail | None:
        """A loop's first claim of a stretch: the statement that opens the
        stretch's row if the claim takes a job (SPEC §16: a killed loop
        leaves a row that shows it died)."""
        start = self.spec.history
        if (not self.spec.continuous or start is None or self.tick_id is not None
                or claim is None or not claim.slots):
            return None
        return opening(start, claim.slots, self.spec.lease_secs)

    def opened(self, tick_id: int, now: float) -> None:
        """The stretch's row exists: renew it once half its lease is spent."""
        self.tick_id = tick_id
        self.renew_at = now + self.spec.lease_secs / 2

    def keep_alive(self, conn: psycopg.Connection[Any], now: float, events: EventSink) -> None:
        """Push the open stretch row's deadline back when due: the loop is
        alive, so the stretch has not died. Off the hot path (once per half
        lease). A lost connection is the run's to recover (`DatabaseError`);
        a refused renewal is only a warning."""
        from tick.db import as_database_error, session_lost

        if self.tick_id is None or now < self.renew_at:
            return
        self.renew_at = now + self.spec.lease_secs / 2
        try:
            renew(conn, self.tick_id, self.spec.lease_secs)
        except Exception as error:
            if session_lost(conn, error):
                raise as_database_error(error, "renewing the tick history row", conn) from None
            events.log("warning", "tick_history_failed", error=type(error).__name__)

    def closing(self, report: TickReport, slots: list[str], began: float) -> Tail | None:
        """The statement that ends the row as `report` says, unless a claim
        for `slots` in its round trip takes a job; `began` is when the run
        (or stretch) began, on the monotonic clock."""
        start = self.spec.history
        if self.spec.continuous:
            if start is None:
                return None
            # Its open row completed; a whole row if the first claim's round
            # trip could not open one (its outcomes were recorded apart).
            return closing(self.tick_id, start, report, slots,
                           ran_secs=time.monotonic() - began, seed=self.seed(time.monotonic()))
        if self.tick_id is None:
            return None
        return closing(self.tick_id, start, report, slots, seed=self.seed(time.monotonic()))

    def foresee(self, report: TickReport, batch: Flush, claim: ClaimRequest | None,
                claims: Claims, deadline_cuts: int,
                began: float) -> tuple[Tail, TickReport] | None:
        """If this round trip may end the run (a loop: its busy stretch), its
        closing statement, with the report it foresees: `report` once `batch`
        is settled. Nothing else runs (the caller asks only then), so the run
        ends unless `claim`, if any, takes a job, or `claims` ended (SPEC
        §16: no round trip of its own on the hot path)."""
        stop_reason: StopReason
        if self.spec.continuous:
            if claim is None or report.claimed == 0:
                return None  # a stretch ends only at a claim that comes back short
            stop_reason = report.stop_reason
        elif claim is None:
            if claims.ended is None:
                return None
            stop_reason = claims.stop_reason(deadline_cuts)
        else:
            stop_reason = "deadline" if deadline_cuts else "drained"
        ahead = foreseen(report, batch)
        ahead.stop_reason = stop_reason
        tail = self.closing(ahead, claim.slots if claim is not None else [], began)
        return None if tail is None else (tail, ahead)

    def wrote(self, ahead: TickReport) -> None:
        """The foreseen closing statement was applied."""
        self.closed = counts(ahead)

    def close(self, conn: psycopg.Connection[Any], report: TickReport, began: float,
              events: EventSink) -> None:
        """At the end of the run (a loop: of a stretch), complete the row
        unless a round trip's closing statement already wrote `report`."""
        if self.spec.continuous and report.claimed == 0:
            return  # no stretch to record
        closed, self.closed = self.closed, None
        try:
            if closed == counts(report):
                return
            tail = self.closing(report, [], began)
            if tail is not None:
                close_quietly(conn, tail, events)
        finally:
            if self.spec.continuous:  # the next stretch opens a row of its own
                self.tick_id, self.renew_at = None, math.inf


def close_quietly(conn: psycopg.Connection[Any], tail: Tail, events: EventSink) -> None:
    """Send a `closing` statement on its own, as the end of a run does when
    the round trip's one did not foresee how the run ended: the jobs are
    recorded already, so a failure here is a warning event, never the
    run's failure."""
    from tick.db import one_exchange

    try:
        with one_exchange(conn):  # the row alone: its commit need not wait for the disk
            conn.execute(sql("quiet_commit"))
            conn.execute(sql(tail[0]), tail[1])
    except Exception as error:
        events.log("warning", "tick_history_failed", error=type(error).__name__)
