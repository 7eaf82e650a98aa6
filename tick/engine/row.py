"""The run's row of the tick history (SPEC §16), as the coordinator keeps it.

A tick's row was inserted by its maintenance statement; a loop writes one row
per busy stretch. Either is ended by the last statement of the round trip
that may end the run (`foresee`), guarded on that round trip's claim coming
back empty, so keeping the history costs no round trip of its own. If the
run then ended otherwise than foreseen, `close` writes what happened, off
the hot path. Coordinator thread only.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tick.engine.flush import Flush, foreseen
from tick.history import Tail, close_quietly, closing, counts

if TYPE_CHECKING:
    import psycopg

    from tick.engine.api import RunSpec
    from tick.engine.report import StopReason, TickReport
    from tick.events import EventSink
    from tick.queue import ClaimRequest


class HistoryRow:
    """The history row of one run (a loop: of its current stretch)."""

    def __init__(self, spec: RunSpec) -> None:
        self.spec = spec
        self.tick_id: int | None = None  # a tick's row, inserted by its maintenance
        # What a round trip's closing statement wrote, to be corrected if the
        # run ended otherwise.
        self.closed: dict[str, Any] | None = None

    def closing(self, report: TickReport, slots: list[str], began: float) -> Tail | None:
        """The statement that ends the row as `report` says, unless a claim
        for `slots` in its round trip takes a job; `began` is when the run
        (or stretch) began, on the monotonic clock."""
        start = self.spec.history
        if self.spec.continuous:
            if start is None:
                return None
            return closing(None, start, report, slots, ran_secs=time.monotonic() - began)
        if self.tick_id is None:
            return None
        return closing(self.tick_id, start, report, slots)

    def foresee(self, report: TickReport, batch: Flush, claim: ClaimRequest | None,
                stop_reason: StopReason, began: float) -> tuple[Tail, TickReport] | None:
        """The closing statement for a round trip that may end the run, with
        the report it foresees: `report` once `batch` is settled."""
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
        if closed == counts(report):
            return
        tail = self.closing(report, [], began)
        if tail is not None:
            close_quietly(conn, tail, events)
