"""The flush (SPEC §6 step 5): outcomes and heartbeats waiting for the next
round trip, and what happens to them once it returns.

Outcomes are grouped by statement (`queue.Writes`) and sent with the next
claim in one pipelined round trip. What the round trip recorded is settled:
each job is counted under its label, and one event per job goes out. A
round trip the server refused is recorded again outcome by outcome, so one
bad outcome fails only its own job (SPEC §4.2).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tick.engine.outcomes import REFUSED_ERROR, error_text, label_of, lost_label
from tick.engine.slots import Heartbeat, Run
from tick.events import EventSink, JobEvent
from tick.queue import (
    ClaimRequest,
    RoundTrip,
    Writes,
    held_claims,
    lost_claims,
    lost_tokens,
    record_each,
    round_trip,
)
from tick.report import TickReport
from tick.words import Record

if TYPE_CHECKING:
    import psycopg

    from tick.engine.spec import Observer
    from tick.history import Tail


@dataclass(slots=True)
class Flush:
    """One batch of fenced writes and the runs and heartbeats behind them.
    Coordinator thread only."""

    writes: Writes = field(default_factory=Writes)
    written: dict[int, tuple[Run, Record]] = field(default_factory=dict)
    heartbeats: list[Heartbeat] = field(default_factory=list)
    # Outcomes a refusal not their own kept out past RESEND_PAUSES (a row an
    # operator's transaction holds): sent again alone, every KEPT_PAUSES,
    # while the run lasts, never in a round trip's batch (decision 0036).
    kept: Writes = field(default_factory=Writes)
    kept_written: dict[int, tuple[Run, Record]] = field(default_factory=dict)
    kept_tries: int = 0
    kept_due: float = 0.0

    def __bool__(self) -> bool:
        return bool(self.writes)

    def record(self, run: Run, record: Record, detail: str | None, delay: float,
               traceback: str | None = None) -> None:
        """Queue `run`'s outcome for the next round trip; a Retry or Fail
        with the handler's traceback, if it raised (SPEC §22)."""
        row = run.row
        if run.span is not None and record in (Record.RETRY, Record.FAIL):
            run.span.failed(detail, traceback)  # its exception event (SPEC §21)
        if record is Record.COMPLETE:
            self.writes.complete.append((row.id, row.token, detail))
        elif record is Record.RETRY:
            assert detail is not None
            self.writes.retry.append((row.id, row.token, detail, delay, traceback))
        elif record is Record.FAIL:
            assert detail is not None
            self.writes.fail.append((row.id, row.token, detail, traceback))
        elif record is Record.CONTINUE:
            self.writes.continuations.append((row.id, row.token, detail, delay))
        else:
            self.writes.release.append((row.id, row.token))
        self.written[row.id] = (run, record)

    def heartbeat(self, beat: Heartbeat, lease: float) -> None:
        """Queue a lease extension, with its checkpoint if it saves one; the
        slot waits until the round trip is back."""
        run = beat.run
        if beat.saving is None:
            self.writes.lease_extensions.append((run.row.id, run.row.token, lease))
        else:
            state, progress = beat.saving
            self.writes.checkpoint.append((run.row.id, run.row.token, state, progress, lease))
        self.heartbeats.append(beat)

    def take(self) -> Flush:
        """This batch, for a round trip; the flush starts empty again."""
        batch = Flush(self.writes, self.written, self.heartbeats)
        self.writes, self.written, self.heartbeats = Writes(), {}, []
        return batch

    def put_back(self, batch: Flush, claim: ClaimRequest | None = None) -> None:
        """A round trip failed: keep `batch` for the next one, ahead of what
        arrived meanwhile (a run reconnects, docs/decisions/0035), with the
        tokens its `claim` may have given jobs: if it committed, the next
        round trip releases them (`Writes.lost`, `send`)."""
        self.writes = batch.writes + self.writes
        self.written = {**batch.written, **self.written}
        self.heartbeats = batch.heartbeats + self.heartbeats
        if claim is not None:
            self.writes.lost += lost_tokens(claim)

    def unsettled(self, batch: Flush) -> None:
        """`batch` was recorded but its count was lost with the connection:
        its outcomes go again, and the fence refuses them as this claim's
        own (counted as recorded, `settle`); its heartbeats were answered."""
        done = batch.writes
        self.put_back(Flush(Writes(complete=done.complete, retry=done.retry, fail=done.fail,
                                   release=done.release, continuations=done.continuations),
                            batch.written))

    def keep(self, kept: Writes, written: dict[int, tuple[Run, Record]], now: float) -> None:
        """Carry the outcomes of `kept` (their entries taken out of
        `written`, so that settle does not count them yet) to be sent again
        at `kept_due`; heartbeats and renewals kept out are not carried (the
        handler's call failed; the engine picks renewals again)."""
        outcomes = Writes(complete=kept.complete, retry=kept.retry, fail=kept.fail,
                          release=kept.release, continuations=kept.continuations
                          ) if kept else kept  # nothing kept: every round trip's case
        if not outcomes:
            if not self.kept:
                self.kept_tries = 0
            return
        for single in outcomes.singles():
            job_id = single.first()[0]
            if job_id in written:
                self.kept_written[job_id] = written.pop(job_id)
        self.kept = self.kept + outcomes
        self.kept_due = now + KEPT_PAUSES[min(self.kept_tries, len(KEPT_PAUSES) - 1)]
        self.kept_tries += 1

    def take_kept(self) -> Flush:
        """The outcomes kept out, for a resend; none are kept meanwhile."""
        batch = Flush(self.kept, self.kept_written)
        self.kept, self.kept_written = Writes(), {}
        return batch

    def unkept(self) -> dict[int, tuple[Run, Record]]:
        """Give up on the outcomes kept out (the run ends): their jobs are
        left to their leases. What they were written for, to be counted."""
        written, self.kept, self.kept_written = self.kept_written, Writes(), {}
        return written

    def release_heartbeats(self) -> None:
        """Answer every waiting heartbeat with "lost" (the run is over)."""
        for beat in self.heartbeats:
            beat.done.set()
        self.heartbeats.clear()


def send(conn: psycopg.Connection[Any], batch: Flush, claim: ClaimRequest | None,
         events: EventSink, tail: Tail | None = None) -> RoundTrip:
    """Record `batch` and claim in one round trip, `tail` last. If the server
    (or the client's encoding) refuses something on a healthy connection,
    record the outcomes apart instead, without the tail; a lost connection
    raises, as does a prepared statement the session lost (a pooler's: the
    run connects again, tick.faults.PREPARED_GONE)."""
    from tick.db import session_lost

    if batch.writes.lost:  # a lost claim's jobs, released as any release is
        batch.writes.release += held_claims(conn, batch.writes.lost)
        batch.writes.lost = []
    try:
        return round_trip(conn, batch.writes, claim, tail)
    except Exception as error:
        if session_lost(conn, error):
            raise
        return record_apart(conn, batch.writes, claim, error, events)


# The pauses before an outcome a refusal that was not its own kept out (a
# lock timeout, a cancel) is sent again, seconds: such a refusal is usually
# gone in a moment, and the coordinator waits meanwhile.
RESEND_PAUSES = (0.1, 0.3)
# Then, while the run lasts, it is sent again alone after each of these
# (the last repeated), between the coordinator's other turns: a row held
# for an hour slows nothing else, and a run that ends first leaves the job
# to its lease (`outcome_unrecorded`).
KEPT_PAUSES = (1.0, 2.0, 5.0, 10.0)


def record_apart(conn: psycopg.Connection[Any], writes: Writes, claim: ClaimRequest | None,
                 error: Exception | None, events: EventSink,
                 pauses: tuple[float, ...] = RESEND_PAUSES) -> RoundTrip:
    """Record the outcomes of a refused batch (or of those kept out before,
    `error` None) one by one; each one the database refuses for its values
    becomes a Fail naming the refusal. One another refusal kept out is sent
    again after each of `pauses`; if it is still kept out, it is returned in
    `kept` (`Flush.keep`), never failed (decision 0036). Then claim on its
    own: a claim the server refuses is a statement error, raised as such
    (never taken for a lost connection, SPEC §4.2)."""
    from tick.db import session_lost
    from tick.faults import passing_fault

    done, refused, unsent = record_each(conn, writes)
    for pause in pauses:
        if not unsent:
            break
        time.sleep(pause)
        again, more, unsent = record_each(conn, unsent)
        done.recorded.update(again.recorded)
        done.extended.update(again.extended)
        done.refused.update(again.refused)
        refused += more
    if refused:
        fails = Writes(fail=[(job_id, token, error_text(
            "OutcomeRefused", "the database refused this job's outcome "
            f"({type(why).__name__}: {_first_line(why)})"), None)
            for job_id, token, why in refused])
        again, still, kept = record_each(conn, fails)
        done.recorded.update(again.recorded)
        if still:  # even the explanation was refused: the plainest words
            plain = Writes(fail=[(job_id, token, REFUSED_ERROR, None)
                                  for job_id, token, _ in still])
            last, lost, out = record_each(conn, plain)
            done.recorded.update(last.recorded)
            kept = kept + out
            for job_id, _, _ in lost:
                events.log("error", "outcome_unrecorded", job_id=job_id)
        unsent = unsent + kept
        events.log("warning", "outcomes_refused", count=len(refused),
                   error=type(error or refused[0][2]).__name__)
    if error is not None:  # the first time: sent again later, alone (Flush.keep)
        for write in unsent.singles():
            if not (write.lease_extensions or write.checkpoint):
                events.log("warning", "outcome_kept_out", job_id=write.first()[0],
                           error=f"{type(error).__name__}: {_first_line(error)}")
    done.kept = unsent
    if claim is not None:
        try:
            claimed = round_trip(conn, Writes(), claim)
        except Exception as why:
            # A cancel, a lock timeout, a deadlock: the claim rolled back
            # whole and claims nothing this turn; ending the run for it left
            # the jobs still running to their leases (decision 0036).
            if session_lost(conn, why) or not passing_fault(why):
                raise
            events.log("warning", "claim_refused", error=f"{type(why).__name__}: "
                       f"{_first_line(why)}")
            done.claim_refused = True
            return done
        done.claimed, done.mark = claimed.claimed, claimed.mark
        done.timeouts = claimed.timeouts
    return done


def resend_kept(conn: psycopg.Connection[Any], flush: Flush, now: float, last: bool,
                report: TickReport, events: EventSink, observer: Observer) -> None:
    """Send the outcomes `flush` kept out again, each alone, and count those
    recorded (or refused for their values, a Fail); what is still kept out
    waits for its next turn, or, the `last` time, is left to its lease
    (`outcome_unrecorded`: the rescue finds it). A lost connection raises
    with the outcomes kept, as they were."""
    batch = flush.take_kept()
    try:
        done = record_apart(conn, batch.writes, None, None, events, pauses=())
    except Exception:
        flush.keep(batch.writes, batch.written, now)
        raise
    flush.keep(done.kept, batch.written, now)
    if last:
        for job_id in flush.kept_written:
            events.log("error", "outcome_unrecorded", job_id=job_id,
                       error="kept out by a refusal not its own until the run ended")
        batch.written.update(flush.unkept())  # counted as the fence would leave them
    try:
        settle(conn, batch.written, done.recorded, report, events, observer)
    except Exception:
        flush.unsettled(batch)  # counted once the connection is back
        raise


def retry_state(attempts: int, max_attempts: int) -> str:
    """The state a Retry leaves: FAILED once attempts are spent, else
    PENDING. retry_jobs.sql decides the same in SQL; tests/test_claim_channels.py
    holds the two together."""
    return "FAILED" if attempts >= max_attempts else "PENDING"


def foreseen(report: TickReport, batch: Flush) -> TickReport:
    """`report` as it will be once `batch` is settled, if every write lands
    (the fence refuses none): a Retry at max_attempts is `failed`."""
    from dataclasses import replace

    ahead = replace(report)
    ahead.completed += len(batch.writes.complete)  # the common case, counted at once
    for run, record in batch.written.values():
        if record is Record.COMPLETE:
            continue
        state = ("FAILED" if record is Record.FAIL
                 else retry_state(run.row.attempts, run.row.max_attempts)
                 if record is Record.RETRY else "PENDING")
        ahead.count(label_of(record, state))
    return ahead


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:200] if text else "no detail"


def _own(lost: tuple[str, bool] | None, record: Record) -> tuple[Record, str] | None:
    """A refused outcome that is this claim's own, as if recorded now."""
    return (record, lost[0]) if lost is not None and lost[1] else None


def settle(conn: psycopg.Connection[Any], written: dict[int, tuple[Run, Record]],
           recorded: dict[int, tuple[Record, str]], report: TickReport, events: EventSink,
           observer: Observer) -> None:
    """Count each written outcome under its label and emit its event. An
    outcome the fence refused is looked up: this claim's own, recorded by an
    exchange whose answer was lost (counted as recorded); `cancelled` if an
    operator cancelled the job; else `discarded`."""
    if not written:
        return
    lost: dict[int, tuple[str, bool]] = {}
    missing = [(job_id, run.row.token) for job_id, (run, _) in written.items()
               if job_id not in recorded]
    if missing:
        lost = lost_claims(conn, missing)
    now = time.perf_counter()
    out = []
    for job_id, (run, record) in written.items():
        hit = recorded.get(job_id) or _own(lost.get(job_id), record)
        if hit is None:
            state = lost[job_id][0] if job_id in lost else "RUNNING"
            label = lost_label(state if job_id in lost else None)
        else:
            state = hit[1]
            label = label_of(record, state)
        report.count(label)
        span, ids = run.span, None
        if span is not None:  # SPEC §21: the span ends as its outcome is known
            span.end(label)
            ids = span.ids
        out.append(JobEvent(job_id, run.row.kind, label, state, run.row.attempts,
                            run.duration,
                            # a job that never reached a slot (no handler) never started
                            run.row.wait_s + ((now - run.started) if run.started else 0.0),
                            *(ids or (None, None))))
    events.jobs(out)
    observer.processed(out)
