"""The coordinator: one `Engine.run`, on the thread that called it.

It owns the connection for the run and turns, until the run is over: record
the outcomes that arrived and claim as many jobs as slots are free, in one
round trip (`flush`, `claims`); hand the claimed jobs to the slots
(`slots`); wait for the next outcome, heartbeat, wake-up or deadline. It
calls the other parts and they return values; none of them calls back.

Deadlines are the coordinator's, not the handler's: a job still running at
its deadline is recorded as a fenced `Retry("deadline exceeded")` and its
handler abandoned (Python cannot kill a thread); the context refuses its
later writes and its slot gets a fresh thread. See docs/decisions/0002.
"""

from __future__ import annotations

import json
import math
import threading
import time
from queue import Empty
from typing import Any

import tick.engine.spans as spans
from tick.db import as_database_error
from tick.engine.backoff import Jitter, reconnect_delay
from tick.engine.claims import Claims
from tick.engine.context import JobContext, Saving
from tick.engine.flush import Flush, mark_lost, send, settle
from tick.engine.maintain import maintain
from tick.engine.outcomes import error_text
from tick.engine.parts import EngineParts
from tick.engine.row import HistoryRow
from tick.engine.slots import WAKE, Heartbeat, Run, cut_at_deadline, handler_stack
from tick.engine.spec import RunSpec
from tick.errors import DatabaseError
from tick.history import Tail
from tick.queue import ClaimedRow, ClaimRequest
from tick.report import TickReport
from tick.words import Record, StopReason

# How often the claims of long-running jobs are checked for an operator cancel.
FENCE_CHECK_SECS = 2.0
# Longest the coordinator sleeps without looking at deadlines and stop.
MAX_WAIT_SECS = 0.5
# How long the coordinator waits for more outcomes once one arrived.
GATHER_SECS = 0.002
# Longest a handler's heartbeat or checkpoint waits for its round trip. The
# coordinator sends it with its next round trip, within MAX_WAIT_SECS when
# nothing else is due; a wait this long means the coordinator is held in a
# slow exchange or the run ended, so the handler hears that its lease is
# lost (LeaseLost, as when the claim lost its job) rather than hanging.
HEARTBEAT_WAIT_SECS = 30.0


class Coordinator:
    """The state of one `Engine.run`. Every field is written and read by the
    coordinator thread only, unless its comment says otherwise."""

    def __init__(self, engine: EngineParts, spec: RunSpec, stop: threading.Event) -> None:
        self.engine = engine
        self.spec = spec
        self.stop = stop  # set by a signal handler; read here
        self.report = TickReport()
        leases = json.dumps({k: float(v) for k, v in engine.registry.leases().items()})
        self.claims = Claims(spec, [engine.slot_name(n) for n in range(spec.concurrency, 0, -1)],
                             leases)
        self.flush = Flush()
        self.running: dict[int, Run] = {}  # claimed jobs without a recorded outcome
        self.stopping_since: float | None = None  # when the stop began; its grace runs from here
        self.deadline_cuts = 0  # jobs recorded as cut at their deadline
        self.next_expiry = math.inf  # the earliest deadline of a running job
        self.next_fence_check = time.monotonic() + FENCE_CHECK_SECS
        self.began = time.monotonic()  # start of the run, or of the loop's current stretch
        self.reconnect_jitter = Jitter(f"{engine.worker_id}-reconnect")
        self.row = HistoryRow(spec)  # this run's row of the history (SPEC §16)
        self.trace: spans.RunTrace | None = None  # the run's (a loop: stretch's) span, §21

    # -- the loop -------------------------------------------------------------

    def run(self) -> TickReport:
        try:
            self._maintain()
            while True:
                try:
                    if not self._step():
                        break
                except DatabaseError as error:
                    # Only a lost connection is worth reconnecting for: a
                    # statement the server refused would be refused again, so
                    # it ends the run and the supervisor counts it (SPEC §4.2).
                    if not (self.spec.continuous and error.connection_lost) \
                            or not self._recover():
                        raise
        except DatabaseError as error:
            self._abandon_all(error)
            raise
        self.report.stop_reason = self.claims.stop_reason(self.deadline_cuts)
        self.report.duration_s = time.monotonic() - self.began
        self._close_history()
        return self.report

    def _step(self) -> bool:
        """One turn; False when the run is over."""
        now = time.monotonic()
        if self.stop.is_set() and self.stopping_since is None:
            self._begin_stop(now)
        if now >= self.next_expiry or self.stopping_since is not None:
            self._expire(now)
        claim = self.claims.request(now)
        if self.flush or claim is not None:
            self._round_trip(claim)
        if now >= self.next_fence_check:
            self._check_fences(now)
        if now >= self.row.renew_at:
            self.row.keep_alive(self.engine.conn, now, self.engine.events)
        if self.flush:
            return True  # outcomes recorded at the claim moment: flush them now
        if not self.running and not self.claims.may_claim_later():
            return False
        if not self.running and self.claims.idle(now) and not self.claims.held_back:
            self._report_stretch()
        self._wait(now)
        return True

    def _report_stretch(self) -> None:
        """Continuous mode: the queue drained and nothing runs, so the busy
        stretch since the last one is reported as one tick."""
        if self.report.claimed == 0 or not self.spec.continuous:
            return
        self.report.duration_s = time.monotonic() - self.began
        self._close_history()
        if self.spec.on_report is not None:
            self.spec.on_report(self.report)
        self.report = TickReport()
        self.began = time.monotonic()

    # -- the history row (SPEC §16) -------------------------------------------

    def _foresee(self, claim: ClaimRequest | None, batch: Flush) -> tuple[Tail, TickReport] | None:
        """If this round trip may end the run (a loop: its busy stretch), the
        closing statement to send last in it: nothing else runs, so the run
        ends unless its claim, if any, takes a job (SPEC §16: no round trip
        of its own on the hot path)."""
        if self.running:
            return None
        reason: StopReason
        if self.spec.continuous:
            if claim is None or self.report.claimed == 0:
                return None  # a stretch ends only at a claim that comes back short
            reason = self.report.stop_reason
        elif claim is None:
            if self.claims.ended is None:
                return None
            reason = self.claims.stop_reason(self.deadline_cuts)
        else:
            reason = "deadline" if self.deadline_cuts else "drained"
        return self.row.foresee(self.report, batch, claim, reason, self.began)

    def _close_history(self) -> None:
        self.row.close(self.engine.conn, self.report, self.began, self.engine.events)
        self.trace = spans.finish(self.trace, self.report)  # the run's or stretch's span
        if self.spec.continuous:
            # The stretch's row is complete: no failure to record on it.
            self.engine.last_tick_id = None

    def _recover(self) -> bool:
        """Reconnect with backoff after a lost database, keeping every
        unrecorded outcome; False if a stop came first and its grace ran out."""
        self.engine.unreachable_since = time.monotonic()  # the loop is unready meanwhile
        try:
            return self._reconnect()
        finally:
            self.engine.unreachable_since = None

    def _reconnect(self) -> bool:
        attempt = 0
        while True:
            self.engine.observer.api_error("database")
            delay = reconnect_delay(attempt, self.reconnect_jitter)
            if self.stop.is_set():
                if self.stopping_since is None:
                    self._begin_stop(time.monotonic())
                assert self.stopping_since is not None
                if time.monotonic() >= self.stopping_since + self.spec.stop_grace_secs:
                    return False
            self.stop.wait(delay)
            attempt += 1
            try:
                self.engine.reconnect()
            except DatabaseError:
                continue
            self.engine.events.log("info", "database_reconnected", attempts=attempt)
            return True

    def _wait(self, now: float) -> None:
        # Wake for the stretch row's renewal too, heartbeats or none.
        horizon = min(now + MAX_WAIT_SECS, self.next_expiry, self.row.renew_at)
        if self.running:
            horizon = min(horizon, self.next_fence_check)
        if self.claims.idle(now):
            horizon = min(horizon, self.claims.idle_until)
        outbox = self.engine.outbox
        timeout = max(horizon - time.monotonic(), 0.0)
        try:
            message = outbox.get(timeout=timeout) if timeout > 0 else outbox.get_nowait()
        except Empty:
            return
        self._accept(message)
        # Gather: outcomes of short jobs arrive microseconds apart. Waiting a
        # little for the rest turns many small flushes (each a commit) into one,
        # and lets the next claim fill every slot that freed meanwhile.
        until = time.monotonic() + GATHER_SECS
        while self.running:
            left = until - time.monotonic()
            try:
                message = outbox.get(timeout=left) if left > 0 else outbox.get_nowait()
            except Empty:
                return
            self._accept(message)

    def _accept(self, message: Any) -> None:
        if message is WAKE:
            self.claims.wake()
        elif isinstance(message, Heartbeat):
            self._queue_heartbeat(message)
        else:
            self._finished(message)

    # -- maintenance, claims and outcomes -------------------------------------

    def _maintain(self) -> None:
        if not self.spec.continuous:  # a loop's spans are its busy stretches' (SPEC §21)
            self.trace = spans.begin(spans.driver_of(self.spec), self.engine.worker_id)
        maintenance = self.engine.maintenance
        if maintenance is None:
            return
        conn = self.engine.conn  # once: after a failure the property would open a new one
        try:
            # A loop's rows are its stretches, not its runs. The tick's
            # deadline bounds its maintenance, and the events of its fires,
            # too (SPEC §6).
            with spans.attached(self.trace):  # the jobs it fires carry the run's context
                done, report = maintain(
                    conn, maintenance, events=self.engine.events, observer=self.engine.observer,
                    start=None if self.spec.continuous else self.spec.history,
                    deadline=self.spec.deadline)
        except DatabaseError:
            raise
        except Exception as error:
            raise as_database_error(error, "maintenance", conn) from None
        self.row.tick_id = self.engine.last_tick_id = done.tick_id
        self.report.rescued = report.rescued
        self.report.pruned = report.pruned
        self.report.fired = report.fired

    def _round_trip(self, claim: ClaimRequest | None) -> None:
        batch = self.flush.take()
        sent = time.monotonic()
        conn = self.engine.conn
        closing = self._foresee(claim, batch)
        # A loop's first claim of a stretch opens the stretch's row (SPEC §16).
        opening = self.row.opening(claim) if closing is None and not self.report.claimed \
            else None
        try:
            result = send(conn, batch, claim, self.engine.events,
                          closing[0] if closing is not None else opening)
        except Exception as error:
            self.flush.put_back(batch)
            raise as_database_error(error, "recording outcomes and claiming", conn) from None
        if closing is not None and result.tail_done:
            self.row.wrote(closing[1])
        elif opening is not None and result.tail_id is not None:
            self.row.opened(result.tail_id, sent)
            self.engine.last_tick_id = result.tail_id  # a failure of the loop is recorded on it
        try:
            settle(conn, batch.written, result.recorded, self.report, self.engine.events,
                   self.engine.observer)
        except Exception as error:
            raise as_database_error(error, "reading fenced-out jobs", conn) from None
        for beat in batch.heartbeats:
            job_id = beat.run.row.id
            secs = result.extended.get(job_id)
            beat.deadline = None if secs is None else sent + secs
            beat.refused = result.refused.get(job_id)
            if secs is not None and beat.saving is not None:
                beat.run.checkpointed = True  # durable before the handler hears so
            beat.done.set()
        if claim is not None:
            self.claims.took(claim, result.claimed, result.held_back, result.mark)
            self._dispatch(result.claimed, sent)

    def _dispatch(self, rows: list[ClaimedRow], sent: float) -> None:
        if self.spec.continuous and rows and self.report.claimed == 0:
            self.began = sent  # a loop's tick starts at its first claim
            self.trace = spans.begin(spans.driver_of(self.spec), self.engine.worker_id)
        self.report.claimed += len(rows)
        batch: list[Run] = []
        for row in rows:
            self.engine.observer.claimed(row.kind, row.wait_s)
            handler = self.engine.registry.get(row.kind)
            deadline = sent + row.lease_s
            ctx = JobContext(row.id, row.kind, row.attempts, row.max_attempts, deadline,
                             self._request_heartbeat, row.token, row.checkpoint)
            run = Run(row, ctx, handler, self.engine.jitter(row.slot), self.trace)
            self.running[row.id] = run
            if handler is None:
                run.span = self.trace.start_job(row) if self.trace is not None else None
                run.outcome = (Record.FAIL, error_text(
                    "UnknownKind", f"no handler is registered for kind {row.kind!r}"), 0.0, None)
                self._finished(run)
                continue
            self.next_expiry = min(self.next_expiry, deadline)
            batch.append(run)
        if batch:
            self.engine.pool.submit(batch)

    def _finished(self, run: Run) -> None:
        if run.ctx.abandoned or run.row.id not in self.running:
            return  # already recorded by the coordinator (deadline or stop)
        del self.running[run.row.id]
        self.claims.release(run.row.slot)
        assert run.outcome is not None
        self.flush.record(run, *run.outcome)

    # -- deadlines, stop, heartbeats, fences ----------------------------------

    def _expire(self, now: float) -> None:
        grace_over = (self.stopping_since is not None
                      and now >= self.stopping_since + self.spec.stop_grace_secs)
        soonest = math.inf
        for run in list(self.running.values()):
            if grace_over:  # handed back; with its checkpoint, as a Continue (SPEC §17)
                self._abandon(run, Record.CONTINUE if run.checkpointed else Record.RELEASE,
                              None, 0.0, None)
            elif run.ctx.monotonic_deadline <= now:
                self._abandon(run, *cut_at_deadline(run, handler_stack(run)))
                if self.spec.deadline is not None:
                    self.deadline_cuts += 1
            else:
                soonest = min(soonest, run.ctx.monotonic_deadline)
        self.next_expiry = soonest

    def _abandon(self, run: Run, record: Record, detail: str | None, delay: float,
                 where: str | None) -> None:
        run.ctx.abandon()
        del self.running[run.row.id]
        self.engine.pool.abandon(run)
        self.claims.release(run.row.slot)
        self.flush.record(run, record, detail, delay, where)

    def _abandon_all(self, error: DatabaseError) -> None:
        for run in list(self.running.values()):
            run.ctx.abandon()
            self.engine.pool.abandon(run)
            spans.abandoned(run.span)
        self.running.clear()
        self.trace = spans.finish(self.trace, None, error)
        self.flush.release_heartbeats()

    def _begin_stop(self, now: float) -> None:
        self.stopping_since = now
        self.claims.stop()
        grace_end = now + self.spec.stop_grace_secs
        for run in self.running.values():
            run.ctx.cancel(stopping=True, grace_end=grace_end)

    def _request_heartbeat(self, ctx: JobContext, saving: Saving | None) -> float | None:
        """Called on a slot thread: post the request (a checkpoint if
        `saving`) and wait for its round trip; the new deadline, or None if
        the claim lost its job."""
        run = self.running.get(ctx.job_id)
        if run is None or run.ctx is not ctx:
            return None
        beat = Heartbeat(run, saving)
        self.engine.outbox.put(beat)
        if not beat.done.wait(timeout=HEARTBEAT_WAIT_SECS):
            return None
        if beat.refused is not None:
            # Which argument is at fault is the server's to say: progress
            # and state are both checked before they are sent (SPEC §17).
            raise ValueError(f"checkpoint: the database refused it ({beat.refused})")
        return beat.deadline

    def _queue_heartbeat(self, beat: Heartbeat) -> None:
        run = beat.run
        if run.ctx.abandoned or run.row.id not in self.running:
            beat.done.set()
            return
        lease = (run.handler and run.handler.lease_secs) or self.spec.lease_secs
        if self.spec.deadline is not None:
            lease = min(lease, max(self.spec.deadline - time.monotonic(), 0.0))
        self.flush.heartbeat(beat, float(lease))

    def _check_fences(self, now: float) -> None:
        self.next_fence_check = now + FENCE_CHECK_SECS
        mark_lost(self.engine.conn, self.running, FENCE_CHECK_SECS)

