"""One maintenance pass and its report, the same wherever it runs: first in
a tick or a loop's run (the coordinator), every interval in the loop's
maintenance part, or once for `awc maintenance tick` (SPEC §7.3, §15, §16).

The pass's schedule fires are reported as each schedule's are recorded (an
event per ledger row, and the observer's fire metrics), inside the run's
deadline; its counters become a tick's report (`TickReport`). A pass that is
a tick of its own completes its history row with that report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tick.engine.spec import Maintenance, NullObserver, Observer
from tick.events import EventSink, report_fires
from tick.history import TickStart, finish
from tick.maintenance import MaintenanceResult
from tick.report import TickReport

if TYPE_CHECKING:
    import psycopg

    from tick.schedules.firing import Fired


def maintenance_report(done: MaintenanceResult) -> TickReport:
    """What a maintenance pass did, as a tick's report counts it."""
    return TickReport(
        rescued=done.rescued + done.rescued_failed, pruned=done.pruned, fired=done.fired
    )


def maintain(
    conn: psycopg.Connection[Any],
    maintenance: Maintenance,
    *,
    events: EventSink,
    observer: Observer | None = None,
    start: TickStart | None = None,
    deadline: float | None = None,
    alone: bool = False,
) -> tuple[MaintenanceResult, TickReport]:
    """Run `maintenance` on `conn` (a history row for `start`, bounded by
    `deadline`, a time.monotonic() instant), reporting its fires to `events`
    and `observer`; the pass and its report. `alone`: the pass is the whole
    tick, so its row, if it inserted one, is completed here."""
    watcher = observer or NullObserver()

    def reported(part: Fired) -> None:  # one schedule's fires, as they are recorded
        report_fires(events, part)
        if part.fires:
            watcher.schedules_fired(part.fires, part.lags.items())

    done = maintenance(conn, start, deadline, reported)
    if done.prune_error is not None:  # the rest of the pass, and the run, go on
        events.log("warning", "prune_failed", error=done.prune_error)
    report = maintenance_report(done)
    if alone and done.tick_id is not None:
        finish(conn, done.tick_id, report)
    return done, report
