"""The coordinator: one `Engine.run`, on the thread that called it.

It owns the connection for the run and turns, until the run is over: record
the outcomes that arrived and claim as many jobs as slots are free, in one
round trip (`flush`, `claims`) with the lease renewals due (`leases`, SPEC
§26); hand the claimed jobs to the slots (`slots`); wait for the next outcome,
heartbeat, wake-up, renewal or deadline. The parts it calls never call back.

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
from tick.db import CONNECT_TIMEOUT_SECS, as_database_error
from tick.engine.backoff import Jitter, reconnect_delay
from tick.engine.claims import Claims
from tick.engine.context import JobContext
from tick.engine.flush import Flush, resend_kept, send, settle
from tick.engine.heartbeats import Heartbeats
from tick.engine.leases import FENCE_CHECK_SECS, LEASE_LOST_ERROR, Leases, fence_check
from tick.engine.maintain import maintain
from tick.engine.outcomes import error_text
from tick.engine.parts import EngineParts
from tick.engine.row import HistoryRow
from tick.engine.slots import WAKE, Heartbeat, Run, cut_at_deadline, handler_stack
from tick.engine.spec import RunSpec
from tick.errors import DatabaseError
from tick.queue import ClaimedRow, ClaimRequest
from tick.report import TickReport
from tick.words import Record

# Longest the coordinator sleeps without looking at deadlines and stop.
MAX_WAIT_SECS = 0.5
# How long the coordinator waits for more outcomes once one arrived.
GATHER_SECS = 0.002


class Coordinator:
    """The state of one `Engine.run`. Every field is written and read by the
    coordinator thread only, unless its comment says otherwise."""

    def __init__(self, engine: EngineParts, spec: RunSpec, stop: threading.Event) -> None:
        self.engine = engine
        self.spec = spec
        self.stop = stop  # set by a signal handler; read here
        self.report = engine.last_report = TickReport()
        leases = json.dumps({k: float(v) for k, v in engine.registry.leases().items()})
        self.claims = Claims(spec, [engine.slot_name(n) for n in range(spec.concurrency, 0, -1)],
                             leases)
        self.flush = Flush()
        self.running: dict[int, Run] = {}  # claimed jobs without a recorded outcome
        self.heartbeats = Heartbeats(spec, self.running, self.flush, engine.outbox)
        self.stopping_since: float | None = None  # when the stop began; its grace runs from here
        self.deadline_cuts = 0  # jobs recorded as cut at their deadline
        self.next_expiry = math.inf  # the earliest deadline of a running job
        self.next_fence_check = time.monotonic() + FENCE_CHECK_SECS
        self.began = time.monotonic()  # start of the run, or of the loop's current stretch
        self.reconnect_jitter = Jitter(f"{engine.worker_id}-reconnect")
        self.row = HistoryRow(spec, self.claims.left)  # this run's history row (SPEC §16)
        self.leases = engine.leases = Leases(spec, enabled=spec.renew_leases)
        self.trace: spans.RunTrace | None = None  # the run's (a loop: stretch's) span, §21

    # -- the loop -------------------------------------------------------------

    def run(self) -> TickReport:
        from tick.watchdog import answering_by  # psycopg's: not on the Lambda's cold import
        if not self.spec.continuous:  # a loop's spans are its busy stretches' (SPEC §21)
            self.trace = spans.begin(spans.driver_of(self.spec), self.engine.worker_id)
        maintained = False
        try:
            while True:
                try:
                    if not maintained:  # sent again, it finds the row it opened (SPEC §16)
                        self._maintain()
                        maintained = True
                    # Each exchange answers before a lease could lapse (SPEC §26).
                    with answering_by(self.engine.conn, self.leases.answer_by()):
                        if not self._step():
                            break
                except DatabaseError as error:
                    self._recover(error)
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
        # While renewals fail, claim nothing (SPEC §26): leases given up on
        # are recorded, the rest retried with this turn's round trip.
        failing = self.leases.failing_since is not None
        if failing:
            self._give_up(now)
        claim = None if failing else self.claims.request(now, riding=bool(self.flush))
        fence_due = now >= self.next_fence_check
        going = bool(self.flush) or claim is not None or fence_due
        self.flush.writes.renewals = self.leases.pick(now, going)
        if self.flush or claim is not None:
            self._round_trip(claim)
        if self.flush.kept:  # outcomes a refusal kept out go alone, now and then (0036)
            self._resend_kept(now)
        if fence_due:
            self.next_fence_check = now + FENCE_CHECK_SECS
            fence_check(self.engine.conn, self.running, time.perf_counter())
        if now >= self.row.renew_at:
            self.row.keep_alive(self.engine.conn, now, self.engine.events)
        if self.flush:
            return True  # outcomes recorded at the claim moment: flush them now
        if not (self.running or self.flush.kept or self.claims.may_claim_later()):
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
        self.report = self.engine.last_report = TickReport()
        self.began = time.monotonic()

    # -- the history row (SPEC §16) -------------------------------------------

    def _close_history(self) -> None:
        self.row.close(self.engine.conn, self.report, self.began, self.engine.events)
        self.trace = spans.finish(self.trace, self.report)  # the run's or stretch's span
        if self.spec.continuous:  # the stretch's row is complete: no failure to record on it
            self.engine.last_tick_id = None

    def _recover(self, error: DatabaseError) -> None:
        """Reconnect with backoff after a lost database, keeping every unrecorded
        outcome; else raise `error` (a refused statement would be refused again,
        SPEC §4.2), as once no connect could end by a stop's grace or deadline."""
        self.leases.failed(time.monotonic())  # they cannot be renewed now
        if not (self.spec.reconnect and error.connection_lost):
            raise error
        self.engine.unreachable_since = time.monotonic()  # the loop is unready meanwhile
        attempt = 0
        try:
            while True:
                self.engine.observer.api_error("database")
                now = time.monotonic()  # a lease unrenewed for half its length cancels its run
                self._give_up(now)
                if self.stop.is_set() and self.stopping_since is None:
                    self._begin_stop(now)
                last = self._must_end_by(CONNECT_TIMEOUT_SECS)
                if now >= last:
                    raise error
                delay = min(reconnect_delay(attempt, self.reconnect_jitter),
                            max(self.leases.next_give_up() - now, 0.0), last - now)
                # Once stopping, a set stop would not wait at all: a tight loop.
                (time.sleep if self.stopping_since is not None else self.stop.wait)(delay)
                attempt += 1
                try:
                    self.engine.reconnect(self.spec.deadline)
                except DatabaseError:
                    continue
                self.engine.events.log("info", "database_reconnected", attempts=attempt,
                                       after=str(error))
                self.leases.renew_all()  # at once: the outage may have cost some their job
                return
        finally:
            self.engine.unreachable_since = None  # ready again, unless renewals still fail

    def _wait(self, now: float) -> None:
        # Wake for the stretch row's renewal and the leases' too, heartbeats or none.
        horizon = min(now + MAX_WAIT_SECS, self.next_expiry, self.row.renew_at,
                      self.leases.next_due)
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
            self.heartbeats.queue(message)
        else:
            self._finished(message)

    # -- maintenance, claims and outcomes -------------------------------------

    def _maintain(self) -> None:
        maintenance = self.engine.maintenance
        if maintenance is None:
            return
        conn = self.engine.conn  # once: after a failure the property would open a new one
        try:
            # A loop's rows are its stretches, not its runs. The tick's deadline
            # bounds its maintenance and its fires' events too (SPEC §6).
            with spans.attached(self.trace):  # the jobs it fires carry the run's context
                done, report = maintain(
                    conn, maintenance, events=self.engine.events, observer=self.engine.observer,
                    start=None if self.spec.continuous else self.spec.history,
                    deadline=self.spec.deadline)
        except Exception as error:  # a DatabaseError as it is, anything else as one
            raise as_database_error(error, "maintenance", conn) from None
        self.row.tick_id = self.engine.last_tick_id = done.tick_id
        self.claims.seeded(done.seed, done.key_seed, done.ready)  # SPEC §24, decision 0040
        self.report.rescued, self.report.pruned = report.rescued, report.pruned
        self.report.fired = report.fired

    def _round_trip(self, claim: ClaimRequest | None) -> None:
        batch = self.flush.take()
        asked = batch.writes.renewals
        sent = time.monotonic()
        conn = self.engine.conn
        closing = None if self.running or self.flush.kept else self.row.foresee(
            self.report, batch, claim, self.claims, self.deadline_cuts, self.began)
        # A loop's first claim of a stretch opens the stretch's row (SPEC §16).
        opening = self.row.opening(claim) if closing is None and not self.report.claimed \
            else None
        try:
            result = send(conn, batch, claim, self.engine.events,
                          closing[0] if closing is not None else opening)
        except Exception as error:
            batch.writes.renewals = []  # picked again, with fresh lengths, next time
            self.flush.put_back(batch, claim)
            self.leases.failed(time.monotonic(), asked)
            raise as_database_error(error, "recording outcomes and claiming", conn) from None
        if closing is not None and result.tail_done:
            self.row.wrote(closing[1])
        elif opening is not None and result.tail_id is not None:
            self.row.opened(result.tail_id, sent)
            self.engine.last_tick_id = result.tail_id  # a failure of the loop is recorded on it
        # A renewal the fence refused cancels its run at once (SPEC §26).
        self.leases.answered(sent, asked, result.extended, result.refused, self.engine.events)
        self.heartbeats.answer(batch.heartbeats, sent, result.extended, result.refused,
                               self.leases)
        if claim is not None:  # before settle's read: a connection lost there loses no job
            self.claims.took(claim, result.claimed, result.held_back, result.mark, result.fair,
                             result.claim_refused, result.lanes)
            self._dispatch(result.claimed, sent, result.timeouts)
        self.flush.keep(result.kept, batch.written, sent)  # not counted while kept out
        try:
            settle(conn, batch.written, result.recorded, self.report, self.engine.events,
                   self.engine.observer)
        except Exception as error:
            self.flush.unsettled(batch)  # counted once the connection is back
            raise as_database_error(error, "reading fenced-out jobs", conn) from None

    def _resend_kept(self, now: float) -> None:
        """The outcomes kept out, sent again when due, the last time a second
        before the deadline (a stop: at its grace's end); then left to leases."""
        last = self._must_end_by(1.0)
        if now < min(self.flush.kept_due, last):
            return
        conn = self.engine.conn
        try:
            resend_kept(conn, self.flush, now, now >= last, self.report,
                        self.engine.events, self.engine.observer)
        except Exception as error:
            raise as_database_error(error, "recording outcomes kept out", conn) from None

    def _dispatch(self, rows: list[ClaimedRow], sent: float,
                  timeouts: dict[int, float] | None = None) -> None:
        if self.spec.continuous and rows and self.report.claimed == 0:
            self.began = sent  # a loop's tick starts at its first claim
            self.trace = spans.begin(spans.driver_of(self.spec), self.engine.worker_id)
        self.report.claimed += len(rows)
        batch: list[Run] = []
        for row in rows:
            self.engine.observer.claimed(row.kind, row.wait_s)
            handler = self.engine.registry.get(row.kind)
            # The job's timeout, else its handler's (SPEC §26), never past the
            # tick's deadline; with neither, the lease is the deadline.
            timeout = (timeouts or {}).get(row.id) or (handler and handler.timeout_secs)
            deadline = sent + (timeout or row.lease_s)
            if timeout and self.spec.deadline is not None:
                deadline = min(deadline, self.spec.deadline)
            ctx = JobContext(row.id, row.kind, row.attempts, row.max_attempts, deadline,
                             self.heartbeats.request, row.token, row.checkpoint,
                             self.engine.dsn, fixed=bool(timeout))
            run = Run(row, ctx, handler, self.engine.jitter(row.slot), self.trace)
            self.running[row.id] = run
            if handler is None:
                run.span = self.trace.start_job(row) if self.trace is not None else None
                run.outcome = (Record.FAIL, error_text(
                    "UnknownKind", f"no handler is registered for kind {row.kind!r}"), 0.0, None)
                self._finished(run)
                continue
            self.next_expiry = min(self.next_expiry, deadline)
            self.leases.track(run, sent, (handler.lease_secs or self.spec.lease_secs))
            batch.append(run)
        if batch:
            self.engine.pool.submit(batch)

    def _finished(self, run: Run) -> None:
        if run.ctx.abandoned or run.row.id not in self.running:
            return  # already recorded by the coordinator (deadline or stop)
        del self.running[run.row.id]
        self.leases.forget(run.row.id)
        self.claims.release(run.row.slot)
        assert run.outcome is not None
        self.flush.record(run, *run.outcome)

    # -- deadlines, stop, fences, leases ---------------------------------------

    def _must_end_by(self, before_deadline: float = 0.0) -> float:
        """Its deadline (less `before_deadline`), or its stop's grace's end if sooner."""
        spec, since = self.spec, self.stopping_since
        return min(math.inf if spec.deadline is None else spec.deadline - before_deadline,
                   math.inf if since is None else since + spec.stop_grace_secs)

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
                # At the run's deadline (its capped lease), not a job's own timeout.
                self.deadline_cuts += self.spec.deadline is not None and (
                    run.ctx.monotonic_deadline >= self.spec.deadline - 1.0)
            else:
                soonest = min(soonest, run.ctx.monotonic_deadline)
        self.next_expiry = soonest

    def _abandon(self, run: Run, record: Record, detail: str | None, delay: float,
                 where: str | None) -> None:
        run.ctx.abandon()
        del self.running[run.row.id]
        self.leases.forget(run.row.id)
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

    def _give_up(self, now: float) -> None:
        """Cancel the runs whose leases went unrenewed for half their length
        while renewals failed: recorded as a Retry if the database answers
        again in time, else left to rescue (SPEC §26)."""
        for run in self.leases.given_up(now):
            if run.row.id in self.running:
                self.engine.events.log("warning", "lease_given_up", job_id=run.row.id,
                                       kind=run.row.kind)
                self._abandon(run, Record.RETRY, LEASE_LOST_ERROR,
                              run.jitter.delay(run.row.attempts - 1), None)
