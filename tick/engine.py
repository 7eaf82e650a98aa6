"""The engine (SPEC §6, §6.2): claim, run and record, shared by every driver.

One coordinator thread owns the database connection; handlers run on slot
threads, one job per slot. The coordinator loops: record the outcomes that
arrived, claim as many jobs as there are free slots, dispatch them, wait for
the next outcome or deadline. Outcomes and the next claim travel in one
pipelined round trip, so a busy engine pays about one round trip per batch,
not per job. A slot that frees is refilled by the next claim: one slow job
never holds back the others.

Deadlines are the coordinator's, not the handler's: a job still running at
its deadline is recorded as a fenced `Retry("deadline exceeded")` and its
handler abandoned (Python cannot kill a thread); the context refuses its later
writes and its slot gets a fresh thread. See docs/decisions/0002.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from queue import Empty, SimpleQueue
from typing import TYPE_CHECKING, Any, Protocol

from tick.backoff import Jitter, reconnect_delay
from tick.context import JobCancelled, JobContext
from tick.db import connection_lost
from tick.errors import DatabaseError
from tick.events import EventSink, JobEvent, NullEvents
from tick.maintenance import MaintenanceResult
from tick.outcomes import (
    Complete,
    Fail,
    Record,
    Retry,
    error_text,
    exception_text,
    outcome_error,
)
from tick.queue import (
    ClaimedRow,
    ClaimRequest,
    RoundTrip,
    Writes,
    lost_claims,
    record_each,
    round_trip,
)
from tick.registry import MAX_LEASE_SECS, REGISTRY, Handler, Registry
from tick.report import StopReason, TickReport
from tick.text import jsonb_refusal

if TYPE_CHECKING:
    import psycopg

# Claim nothing when less than this is left before the deadline: a lease that
# short cannot run a job, and the tick must return on time.
MIN_CLAIM_SECS = 1.0
# How often the claims of long-running jobs are checked for an operator cancel.
FENCE_CHECK_SECS = 2.0
# Longest the coordinator sleeps without looking at deadlines and stop.
MAX_WAIT_SECS = 0.5
# How long the coordinator waits for more outcomes once one arrived.
GATHER_SECS = 0.002
DEADLINE_ERROR = error_text("DeadlineExceeded", "deadline exceeded")
REFUSED_ERROR = error_text("OutcomeRefused", "the database refused this job's outcome")


class Observer(Protocol):
    """Receives what metrics need (SPEC §9); `tick.metrics` implements it."""

    def claimed(self, kind: str, wait_s: float) -> None: ...

    def processed(self, events: list[JobEvent]) -> None: ...

    def api_error(self, component: str) -> None: ...


class NullObserver:
    """Records nothing."""

    def claimed(self, kind: str, wait_s: float) -> None:
        pass

    def processed(self, events: list[JobEvent]) -> None:
        pass

    def api_error(self, component: str) -> None:
        pass


@dataclass(frozen=True, slots=True)
class RunSpec:
    """What one run of the engine may do."""

    max_jobs: int | None = None  # None: no limit
    deadline: float | None = None  # time.monotonic() instant; None: none
    concurrency: int = 4
    lease_secs: float = 300
    kinds: list[str] | None = None
    queues: list[str] | None = None
    stop_grace_secs: float = 30
    # The loop keeps claiming after the queue drained (on a wake or poll)
    # instead of ending the run, reports each busy stretch as a tick, and
    # rides out a database outage by reconnecting.
    continuous: bool = False
    poll_interval_s: float = 1.0
    on_report: Callable[[TickReport], None] | None = None

    def __post_init__(self) -> None:
        # Bounds as SPEC §2 gives them: a lease PostgreSQL cannot add to now()
        # would fail every claim of the run, not this caller's call.
        if not 0 < self.lease_secs <= MAX_LEASE_SECS:
            raise ValueError(f"lease_secs must be in (0, {MAX_LEASE_SECS}]")
        if not 1 <= self.concurrency <= 256:
            raise ValueError("concurrency must be between 1 and 256")
        if self.max_jobs is not None and self.max_jobs < 1:
            raise ValueError("max_jobs must be at least 1")
        if not 0 <= self.stop_grace_secs <= 86400:
            raise ValueError("stop_grace_secs must be between 0 and 86400")


class _Run:
    """One claimed job from claim to recorded outcome."""

    __slots__ = ("ctx", "duration", "handler", "jitter", "outcome", "row", "started")

    def __init__(
        self, row: ClaimedRow, ctx: JobContext, handler: Handler | None, jitter: Jitter
    ) -> None:
        self.row = row
        self.ctx = ctx
        self.handler = handler  # None: no handler knows the kind; never executed
        self.jitter = jitter  # the jitter stream of the slot named in the claim
        self.started = 0.0
        self.duration = 0.0
        # (Record, detail, retry delay): detail is the result JSON or the error.
        self.outcome: tuple[Record, str | None, float] | None = None


@dataclass(slots=True)
class _Heartbeat:
    run: _Run
    done: threading.Event = field(default_factory=threading.Event)
    deadline: float | None = None


_WAKE = object()


class _Pool:
    """The threads that run handlers, one job at a time each.

    Claimed jobs wait in one shared deque. At most one thread is on its way
    (woken or starting) at any moment: a thread that takes a job and sees more
    waiting calls the next one. Short jobs are thus drained by a few threads
    instead of waking one per job and fighting over the GIL; long jobs still
    gain a thread per wake-up (tens of microseconds), so none waits behind
    another (no head-of-line blocking). A thread whose job was abandoned at
    its deadline is written off and replaced; it ends when its handler returns.
    """

    def __init__(self, outbox: SimpleQueue[Any]) -> None:
        self._outbox = outbox
        self._ready: deque[_Run] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._idle = 0
        self._coming = 0  # woken or started, not yet looking at the deque
        self._threads = 0
        self._size = 0
        self._names = 0

    def resize(self, size: int) -> None:
        """Run at most `size` jobs at once (threads start on demand)."""
        with self._cond:
            self._size = size

    def submit(self, runs: list[_Run]) -> None:
        with self._cond:
            self._ready.extend(runs)
            self._call_one()

    def _call_one(self) -> None:
        """Wake or start one thread unless one is already on its way (locked)."""
        if self._coming or not self._ready:
            return
        if self._idle > self._coming:
            self._coming += 1
            self._cond.notify()
        elif self._threads < self._size:
            self._coming += 1
            self._start()

    def abandon(self, run: _Run) -> None:
        """Give up on `run`: unqueue it if no thread took it yet; otherwise its
        thread is stuck in the handler, so write it off and start another."""
        with self._cond:
            if run.started:
                self._threads -= 1
                self._call_one()
            else:
                with contextlib.suppress(ValueError):
                    self._ready.remove(run)

    def _start(self) -> None:
        self._threads += 1
        self._names += 1
        threading.Thread(target=self._serve, name=f"awc-slot-{self._names}", daemon=True).start()

    def _serve(self) -> None:
        cond, ready = self._cond, self._ready
        with cond:
            self._coming -= 1
        while True:
            with cond:
                while not ready:
                    if self._threads > self._size:
                        self._threads -= 1
                        return
                    self._idle += 1
                    cond.wait()
                    self._idle -= 1
                    self._coming = max(self._coming - 1, 0)
                run = ready.popleft()
                run.started = time.perf_counter()  # under the lock: see abandon()
                self._call_one()
            try:
                _execute(run, run.jitter)
            except BaseException as error:  # never: _execute catches everything
                run.outcome = (Record.FAIL, exception_text(error), 0.0)
            if run.ctx.abandoned:
                return  # written off by the coordinator; its job is recorded
            self._outbox.put(run)


def _execute(run: _Run, jitter: Jitter) -> None:
    """Run one handler to an outcome. Never raises: whatever the handler does
    (raise SystemExit, return something unrecordable), the job gets an
    outcome naming the problem and the slot lives on (SPEC §6.1)."""
    ctx = run.ctx
    if ctx.cancelled and ctx.stopping:
        run.outcome = (Record.RELEASE, None, 0.0)  # claimed, never started
        return
    try:
        record, detail = _run_handler(run)
    except BaseException as error:  # SystemExit, KeyboardInterrupt, GeneratorExit, ...
        record, detail = Record.RETRY, exception_text(error)
    run.duration = time.perf_counter() - run.started
    delay = jitter.delay(run.row.attempts - 1) if record is Record.RETRY else 0.0
    run.outcome = (record, detail, delay)


def _run_handler(run: _Run) -> tuple[Record, str | None]:
    ctx = run.ctx
    handler = run.handler
    assert handler is not None  # unknown kinds are failed before dispatch
    text = run.row.payload
    try:
        payload: Any = {} if text == "{}" else json.loads(text)
    except RecursionError:
        # jsonb nests deeper than Python decodes: retrying cannot help.
        return Record.FAIL, error_text("PayloadError", "payload is nested too deeply to decode")
    if handler.payload is not None:
        from pydantic import ValidationError

        try:
            payload = handler.payload.model_validate(payload)
        except ValidationError as error:
            return Record.FAIL, error_text("ValidationError", _brief(error))
        except RecursionError:
            return Record.FAIL, error_text("PayloadError", "payload is nested too deeply")
    try:
        value = handler.fn(ctx, payload)
    except JobCancelled as error:
        if ctx.stopping and not ctx.abandoned:
            return Record.RELEASE, None  # SPEC §6.1: released, refunded
        if ctx.remaining() <= 0:
            return Record.RETRY, DEADLINE_ERROR
        return Record.RETRY, exception_text(error)
    except Exception as error:
        return Record.RETRY, exception_text(error)
    try:
        return _outcome_of(value)
    except Exception as error:
        return Record.FAIL, error_text(
            "OutcomeError", f"the handler returned a value that cannot be recorded "
            f"({type(error).__name__})")


def _outcome_of(value: Any) -> tuple[Record, str | None]:
    """SPEC §6.1: None or a JSON-able value is Complete; Complete, Retry and
    Fail say so. A result that cannot be stored is a Fail: retrying the same
    code would produce it again."""
    if isinstance(value, Retry | Fail):
        return (Record.RETRY if isinstance(value, Retry) else Record.FAIL, outcome_error(value))
    result = value.result if isinstance(value, Complete) else value
    if result is None:
        return (Record.COMPLETE, None)
    try:
        text = json.dumps(result, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except RecursionError:
        return (Record.FAIL, error_text("ValueError", "result is nested too deeply"))
    except (TypeError, ValueError) as error:
        return (Record.FAIL, error_text(type(error).__name__, f"result is not JSON: {error}"))
    # jsonb holds neither NUL nor lone surrogates: one bad row must not sink the batch.
    refusal = jsonb_refusal(text)
    if refusal is not None:
        return (Record.FAIL, error_text("ValueError", f"result {refusal}"))
    return (Record.COMPLETE, text)


def _brief(error: Any) -> str:
    """A pydantic error without the input values (the payload stays private)."""
    parts = []
    for item in error.errors(include_input=False, include_url=False):
        where = ".".join(str(p) for p in item.get("loc", ())) or "payload"
        parts.append(f"{where}: {item.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid payload"


class Engine:
    """Claims, runs and records jobs over one connection; reusable across runs."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        *,
        worker_id: str = "awc-worker",
        registry: Registry | None = None,
        events: EventSink | None = None,
        observer: Observer | None = None,
        maintenance: Callable[[psycopg.Connection[Any]], MaintenanceResult] | None = None,
        reconnect: Callable[[], psycopg.Connection[Any]] | None = None,
    ) -> None:
        self.conn = conn
        self.reconnect = reconnect
        self.worker_id = worker_id
        self.registry = registry or REGISTRY
        self.events = events or NullEvents()
        self.observer = observer or NullObserver()
        self._maintenance = maintenance
        self._outbox: SimpleQueue[Any] = SimpleQueue()
        self._pool = _Pool(self._outbox)
        self._jitters: dict[str, Jitter] = {}

    # -- public ---------------------------------------------------------------

    def wake(self) -> None:
        """Look for work now (a NOTIFY arrived, or a stop was requested)."""
        self._outbox.put(_WAKE)

    def run(self, spec: RunSpec, stop: threading.Event | None = None) -> TickReport:
        """One bounded pass (SPEC §6): maintenance, then claim-run-record until
        N jobs were claimed, the queue drained, the deadline came, or `stop`."""
        self._pool.resize(spec.concurrency)
        return _Pass(self, spec, stop or threading.Event()).run()

    # -- slots ----------------------------------------------------------------

    def slot_name(self, n: int) -> str:
        return f"{self.worker_id}-{n}"

    def jitter(self, slot: str) -> Jitter:
        """The xorshift32 stream of slot `slot` (SPEC §5)."""
        found = self._jitters.get(slot)
        if found is None:
            found = self._jitters[slot] = Jitter(slot)
        return found


class _Pass:
    """The state of one `Engine.run`."""

    def __init__(self, engine: Engine, spec: RunSpec, stop: threading.Event) -> None:
        self.e = engine
        self.spec = spec
        self.stop = stop
        self.report = TickReport()
        self.free = [engine.slot_name(n) for n in range(spec.concurrency, 0, -1)]
        self.running: dict[int, _Run] = {}
        self.writes = Writes()
        self.written: dict[int, tuple[_Run, Record]] = {}
        self.heartbeats: list[_Heartbeat] = []
        self.claiming = True
        self.idle_until = 0.0
        self.stopping_since: float | None = None
        self.cut_by_deadline = False
        self.hit_max_jobs = False
        self.next_expiry = math.inf
        self.next_fence_check = time.monotonic() + FENCE_CHECK_SECS
        leases = {k: float(v) for k, v in engine.registry.leases().items()}
        self.leases_json = json.dumps(leases)
        self.began = time.monotonic()
        self.reconnect_jitter = Jitter(f"{engine.worker_id}-reconnect")

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
                    if not (self.spec.continuous and self.e.reconnect
                            and error.connection_lost) or not self._recover():
                        raise
        except DatabaseError:
            self._abandon_all()
            raise
        self.report.stop_reason = self._stop_reason()
        self.report.duration_s = time.monotonic() - self.began
        return self.report

    def _step(self) -> bool:
        """One turn of the coordinator; False when the run is over."""
        now = time.monotonic()
        if self.stop.is_set() and self.stopping_since is None:
            self._begin_stop(now)
        if now >= self.next_expiry or self.stopping_since is not None:
            self._expire(now)
        claim = self._claim_request(now)
        if self.writes or claim is not None:
            self._round_trip(claim)
        if now >= self.next_fence_check:
            self._check_fences(now)
        if self.writes:
            return True  # outcomes recorded at the claim moment: flush them now
        if not self.running and not self._may_claim_later():
            return False
        if self.spec.continuous and not self.running and now < self.idle_until:
            self._report_stretch()
        self._wait(now)
        return True

    def _report_stretch(self) -> None:
        """Continuous mode: the queue drained and nothing runs, so the busy
        stretch since the last one is reported as one tick."""
        if self.report.claimed == 0 or self.spec.on_report is None:
            return
        self.report.duration_s = time.monotonic() - self.began
        self.spec.on_report(self.report)
        self.report = TickReport()
        self.began = time.monotonic()

    def _recover(self) -> bool:
        """Reconnect with backoff after a lost database, keeping every
        unrecorded outcome; False if a stop came first and its grace ran out."""
        attempt = 0
        while True:
            self.e.observer.api_error("database")
            delay = reconnect_delay(attempt, self.reconnect_jitter)
            if self.stop.is_set():
                if self.stopping_since is None:
                    self._begin_stop(time.monotonic())
                assert self.stopping_since is not None
                if time.monotonic() >= self.stopping_since + self.spec.stop_grace_secs:
                    return False
            self.stop.wait(delay)
            attempt += 1
            assert self.e.reconnect is not None
            try:
                old, self.e.conn = self.e.conn, self.e.reconnect()
            except DatabaseError:
                continue
            with contextlib.suppress(Exception):  # the old connection is broken anyway
                old.close()
            self.e.events.log("info", "database_reconnected", attempts=attempt)
            return True

    def _may_claim_later(self) -> bool:
        return self.claiming and self.spec.continuous

    def _stop_reason(self) -> StopReason:
        if self.stopping_since is not None:
            return "stopped"
        if self.cut_by_deadline:
            return "deadline"
        if self.hit_max_jobs:
            return "max_jobs"
        return "drained"

    def _wait(self, now: float) -> None:
        horizon = now + MAX_WAIT_SECS
        horizon = min(horizon, self.next_expiry)
        if self.running:
            horizon = min(horizon, self.next_fence_check)
        if self.idle_until > now and self.claiming:
            horizon = min(horizon, self.idle_until)
        timeout = max(horizon - time.monotonic(), 0.0)
        try:
            message = self.e._outbox.get(timeout=timeout) if timeout > 0 else \
                self.e._outbox.get_nowait()
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
                message = self.e._outbox.get(timeout=left) if left > 0 else \
                    self.e._outbox.get_nowait()
            except Empty:
                return
            self._accept(message)

    def _accept(self, message: Any) -> None:
        if message is _WAKE:
            self.idle_until = 0.0
        elif isinstance(message, _Heartbeat):
            self._queue_heartbeat(message)
        else:
            self._finished(message)

    # -- maintenance ----------------------------------------------------------

    def _maintain(self) -> None:
        if self.e._maintenance is None:
            return
        try:
            done = self.e._maintenance(self.e.conn)
        except DatabaseError:
            raise
        except Exception as error:
            raise _db_error(error, "maintenance", self.e.conn) from None
        self.report.rescued = done.rescued + done.rescued_failed
        self.report.pruned = done.pruned

    # -- claiming -------------------------------------------------------------

    def _claim_request(self, now: float) -> ClaimRequest | None:
        spec = self.spec
        if not self.claiming or not self.free or self.stopping_since is not None:
            return None
        if now < self.idle_until:
            return None
        left = math.inf if spec.deadline is None else spec.deadline - now
        if left < MIN_CLAIM_SECS:
            self.claiming = False
            self.cut_by_deadline = True
            return None
        want = len(self.free)
        if spec.max_jobs is not None:
            want = min(want, spec.max_jobs - self.report.claimed)
            if want <= 0:
                self.claiming = False
                self.hit_max_jobs = True
                return None
        return ClaimRequest(
            slots=self.free[-want:],
            lease_secs=float(spec.lease_secs),
            cap_secs=float(spec.lease_secs) if math.isinf(left) else left,
            leases_json=self.leases_json,
            kinds=spec.kinds,
            queues=spec.queues,
        )

    def _round_trip(self, claim: ClaimRequest | None) -> None:
        writes, self.writes = self.writes, Writes()
        written, self.written = self.written, {}
        heartbeats, self.heartbeats = self.heartbeats, []
        sent = time.monotonic()
        conn = self.e.conn
        try:
            try:
                result = round_trip(conn, writes, claim)
            except Exception as error:
                if connection_lost(conn):
                    raise
                # The server (or the client's encoding) refused something in
                # this batch: find it, fail that job alone, record the rest.
                result = self._record_apart(writes, claim, error)
        except Exception as error:
            # Keep every outcome for the next attempt (the loop reconnects);
            # a tick that gives up leaves them to the leases.
            self.writes, self.written = _merge(writes, self.writes), {**written, **self.written}
            self.heartbeats = heartbeats + self.heartbeats
            raise _db_error(error, "recording outcomes and claiming", conn) from None
        self._settle(written, result.recorded)
        for beat in heartbeats:
            secs = result.extended.get(beat.run.row.id)
            beat.deadline = None if secs is None else sent + secs
            beat.done.set()
        if claim is not None:
            self._dispatch(result.claimed, sent)
            if len(result.claimed) < len(claim.slots):
                # The queue has no more ready jobs (for this claimer, now).
                if self.spec.continuous:
                    self.idle_until = time.monotonic() + self.spec.poll_interval_s
                else:
                    self.claiming = False

    def _record_apart(self, writes: Writes, claim: ClaimRequest | None,
                      error: Exception) -> RoundTrip:
        """Record the outcomes of a refused batch one by one; each one the
        database refuses becomes a Fail naming the refusal. Then claim on its
        own: a claim the server refuses is a statement error, raised as such
        (never taken for a lost connection, SPEC §4.2)."""
        conn = self.e.conn
        done, refused = record_each(conn, writes)
        if refused:
            fails = Writes(fail=[(job_id, token, error_text(
                "OutcomeRefused", "the database refused this job's outcome "
                f"({type(why).__name__}: {_first_line(why)})")) for job_id, token, why in refused])
            again, still = record_each(conn, fails)
            done.recorded.update(again.recorded)
            if still:  # even the explanation was refused: the plainest words
                plain = Writes(fail=[(job_id, token, REFUSED_ERROR) for job_id, token, _ in still])
                last, lost = record_each(conn, plain)
                done.recorded.update(last.recorded)
                for job_id, _, _ in lost:
                    self.e.events.log("error", "outcome_unrecorded", job_id=job_id)
            self.e.events.log("warning", "outcomes_refused", count=len(refused),
                              error=type(error).__name__)
        if claim is not None:
            done.claimed = round_trip(conn, Writes(), claim).claimed
        return done

    def _dispatch(self, rows: list[ClaimedRow], sent: float) -> None:
        if self.spec.continuous and rows and self.report.claimed == 0:
            self.began = sent  # a loop's tick starts at its first claim
        claimed_slots = {row.slot for row in rows}
        self.free = [name for name in self.free if name not in claimed_slots]
        self.report.claimed += len(rows)
        batch: list[_Run] = []
        for row in rows:
            self.e.observer.claimed(row.kind, row.wait_s)
            handler = self.e.registry.get(row.kind)
            deadline = sent + row.lease_s
            ctx = JobContext(row.id, row.kind, row.attempts, row.max_attempts, deadline,
                             self._request_heartbeat, row.token)
            jitter = self.e.jitter(row.slot)
            if handler is None:
                run = _Run(row, ctx, None, jitter)
                run.outcome = (Record.FAIL, error_text(
                    "UnknownKind", f"no handler is registered for kind {row.kind!r}"), 0.0)
                self.running[row.id] = run
                self._finished(run)
                continue
            run = _Run(row, ctx, handler, jitter)
            self.running[row.id] = run
            if deadline < self.next_expiry:
                self.next_expiry = deadline
            batch.append(run)
        if batch:
            self.e._pool.submit(batch)

    # -- outcomes -------------------------------------------------------------

    def _finished(self, run: _Run) -> None:
        if run.ctx.abandoned or run.row.id not in self.running:
            return  # already recorded by the coordinator (deadline or stop)
        del self.running[run.row.id]
        self.free.append(run.row.slot)
        assert run.outcome is not None
        self._write(run, *run.outcome)

    def _write(self, run: _Run, record: Record, detail: str | None, delay: float) -> None:
        row = run.row
        if record is Record.COMPLETE:
            self.writes.complete.append((row.id, row.token, detail))
        elif record is Record.RETRY:
            assert detail is not None
            self.writes.retry.append((row.id, row.token, detail, delay))
        elif record is Record.FAIL:
            assert detail is not None
            self.writes.fail.append((row.id, row.token, detail))
        else:
            self.writes.release.append((row.id, row.token))
        self.written[row.id] = (run, record)

    def _settle(self, written: dict[int, tuple[_Run, Record]],
                recorded: dict[int, tuple[Record, str]]) -> None:
        if not written:
            return
        lost: dict[int, str] = {}
        missing = [(job_id, run.row.token) for job_id, (run, _) in written.items()
                   if job_id not in recorded]
        if missing:
            try:
                lost = lost_claims(self.e.conn, missing)
            except Exception as error:
                raise _db_error(error, "reading fenced-out jobs", self.e.conn) from None
        report = self.report
        now = time.perf_counter()
        events = []
        for job_id, (run, record) in written.items():
            hit = recorded.get(job_id)
            if hit is None:
                outcome = "cancelled" if lost.get(job_id) == "CANCELLED" else "discarded"
                state = lost.get(job_id, "RUNNING")
            else:
                state = hit[1]
                outcome = _outcome_label(record, state)
            report.count(outcome)
            events.append(JobEvent(job_id, run.row.kind, outcome, state, run.row.attempts,
                                   run.duration, run.row.wait_s + (now - run.started)))
        self.e.events.jobs(events)
        self.e.observer.processed(events)

    # -- deadlines, stop, heartbeats ------------------------------------------

    def _expire(self, now: float) -> None:
        grace_over = (self.stopping_since is not None
                      and now >= self.stopping_since + self.spec.stop_grace_secs)
        soonest = math.inf
        for run in list(self.running.values()):
            if grace_over:
                self._abandon(run, Record.RELEASE, None, 0.0)
            elif run.ctx.monotonic_deadline <= now:
                delay = run.jitter.delay(run.row.attempts - 1)
                self._abandon(run, Record.RETRY, DEADLINE_ERROR, delay)
                if self.spec.deadline is not None:
                    self.cut_by_deadline = True
            else:
                soonest = min(soonest, run.ctx.monotonic_deadline)
        self.next_expiry = soonest

    def _abandon(self, run: _Run, record: Record, detail: str | None, delay: float) -> None:
        run.ctx.abandon()
        del self.running[run.row.id]
        self.e._pool.abandon(run)
        self.free.append(run.row.slot)
        self._write(run, record, detail, delay)

    def _abandon_all(self) -> None:
        for run in list(self.running.values()):
            run.ctx.abandon()
            self.e._pool.abandon(run)
        self.running.clear()
        for beat in self.heartbeats:
            beat.done.set()
        self.heartbeats.clear()

    def _begin_stop(self, now: float) -> None:
        self.stopping_since = now
        self.claiming = False
        grace_end = now + self.spec.stop_grace_secs
        for run in self.running.values():
            run.ctx.cancel(stopping=True, grace_end=grace_end)

    def _request_heartbeat(self, ctx: JobContext) -> float | None:
        run = self.running.get(ctx.job_id)
        if run is None or run.ctx is not ctx:
            return None
        beat = _Heartbeat(run)
        self.e._outbox.put(beat)
        if not beat.done.wait(timeout=30):
            return None
        return beat.deadline

    def _queue_heartbeat(self, beat: _Heartbeat) -> None:
        run = beat.run
        if run.ctx.abandoned or run.row.id not in self.running:
            beat.done.set()
            return
        lease = (run.handler and run.handler.lease_secs) or self.spec.lease_secs
        if self.spec.deadline is not None:
            lease = min(lease, max(self.spec.deadline - time.monotonic(), 0.0))
        self.writes.extend.append((run.row.id, run.row.token, float(lease)))
        self.heartbeats.append(beat)

    def _check_fences(self, now: float) -> None:
        self.next_fence_check = now + FENCE_CHECK_SECS
        old = [(job_id, run.row.token) for job_id, run in self.running.items()
               if run.started and time.perf_counter() - run.started >= FENCE_CHECK_SECS]
        if not old:
            return
        try:
            lost = lost_claims(self.e.conn, old)
        except Exception as error:
            raise _db_error(error, "checking claims", self.e.conn) from None
        for job_id in lost:
            run = self.running.get(job_id)
            if run is not None:
                run.ctx.mark_lost()


def _merge(first: Writes, second: Writes) -> Writes:
    return Writes(
        first.complete + second.complete,
        first.retry + second.retry,
        first.fail + second.fail,
        first.release + second.release,
        first.extend + second.extend,
    )


def _outcome_label(record: Record, state: str) -> str:
    if record is Record.RELEASE:
        return "other"
    if state == "FAILED":
        return "failed"
    if state == "PENDING":
        return "retried"
    return "completed"


def _db_error(
    error: BaseException, doing: str, conn: psycopg.Connection[Any] | None
) -> DatabaseError:
    from tick.db import database_error

    return database_error(error, None, doing, conn)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:200] if text else "no detail"
