"""The slot pool (SPEC §6.2): threads that run handlers, one job at a time
each, and what one claimed job carries from its claim to its outcome.

Slots talk to the coordinator one way only: through the outbox, which
carries a finished `Run`, a `Heartbeat` request, or `WAKE`.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any

from tick.engine.backoff import Jitter
from tick.engine.context import JobCancelled, JobContext
from tick.engine.outcomes import (
    DEADLINE_ERROR,
    Continue,
    Fail,
    Retry,
    error_text,
    exception_text,
    outcome_of,
)
from tick.engine.registry import Handler
from tick.problems import brief, declared_names
from tick.queue import ClaimedRow
from tick.tracebacks import exception_traceback, thread_stack
from tick.words import Record

if TYPE_CHECKING:
    from tick.engine.spans import JobSpan, RunTrace

# What a run's outcome is recorded as: (statement, detail, retry delay,
# traceback). The detail is the result JSON or the error; the traceback, the
# handler's own frames where it raised or where it was cut (SPEC §22).
Outcome = tuple[Record, str | None, float, str | None]

# Put on the outbox to make the coordinator look for work now.
WAKE = object()


class Run:
    """One claimed job from claim to recorded outcome."""

    __slots__ = ("checkpointed", "ctx", "duration", "handler", "jitter", "outcome", "row",
                 "span", "started", "thread", "tracing")

    def __init__(
        self, row: ClaimedRow, ctx: JobContext, handler: Handler | None, jitter: Jitter,
        tracing: RunTrace | None = None,
    ) -> None:
        self.row = row  # as claimed; never changes
        self.ctx = ctx  # read by the slot's handler, flagged by the coordinator
        self.handler = handler  # None: no handler knows the kind; never executed
        self.jitter = jitter  # the jitter stream of the slot named in the claim
        self.started = 0.0  # written by the slot under the pool's lock; read by both
        self.duration = 0.0  # written by the slot before it posts the run
        # Written by the slot (or the coordinator, for a job it abandons)
        # before the run reaches the flush.
        self.outcome: Outcome | None = None
        # The slot thread in the handler (its ident), 0 before and after:
        # written by the slot, read by the coordinator to see where a job
        # cut at its deadline was (SPEC §22).
        self.thread = 0
        # A checkpoint of this claim is durable (SPEC §17): cut at its deadline
        # or at the end of a stop's grace, the job continues from it. Written
        # by the coordinator before it answers the checkpoint; read by both.
        self.checkpointed = False
        # SPEC §21, while a tracer provider is set: the run's span (set by the
        # coordinator) and this job's (by the slot as the handler starts).
        self.tracing = tracing
        self.span: JobSpan | None = None


@dataclass(slots=True)
class Heartbeat:
    """A slot's request to extend its lease, saving a checkpoint if `saving`
    (state JSON, progress); the slot waits on `done`."""

    run: Run
    saving: tuple[str, float | None] | None = None
    done: threading.Event = field(default_factory=threading.Event)
    deadline: float | None = None  # set by the coordinator before `done`
    refused: str | None = None  # why the database refused the checkpoint (not the lease)


class SlotPool:
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
        # Every field but the outbox is read and written under `_cond`, by the
        # coordinator (submit, abandon, resize) and the slot threads (_serve).
        self._outbox = outbox  # slots put finished runs; the coordinator gets them
        self._ready: deque[Run] = deque()  # claimed jobs no thread has taken yet
        self._cond = threading.Condition(threading.Lock())
        self._idle = 0  # threads waiting on the condition
        self._coming = 0  # woken or started, not yet looking at the deque
        self._threads = 0  # live threads, the written-off ones not counted
        self._size = 0  # most threads at once (the run's concurrency)
        self._names = 0  # threads started so far, for their names
        self._pid = os.getpid()  # a forked child's slot ends itself (_serve)

    def resize(self, size: int) -> None:
        """Run at most `size` jobs at once (threads start on demand)."""
        with self._cond:
            self._size = size

    def submit(self, runs: list[Run]) -> None:
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

    def abandon(self, run: Run) -> None:
        """Give up on `run`: unqueue it if no thread took it yet; otherwise its
        thread is stuck in the handler, so write it off and start another."""
        with self._cond:
            if run.started:
                # Cut in its handler (a deadline, the stop's grace): it ran
                # until now. Its duration (job event, metrics) read 0 for the
                # slowest jobs of all, since only a returning slot set it.
                run.duration = time.perf_counter() - run.started
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
                run.thread = threading.get_ident()
                self._call_one()
            try:
                execute(run)
            except BaseException as error:  # never: execute catches everything
                run.outcome = (Record.FAIL, exception_text(error), 0.0, None)
            if os.getpid() != self._pid:
                # A child the handler forked returned from it: it has no
                # coordinator, and waiting here it lived for ever, deaf to
                # SIGTERM, holding its parent's stdout open.
                os._exit(0)
            run.thread = 0
            if run.ctx.abandoned:
                return  # written off by the coordinator; its job is recorded
            self._outbox.put(run)


def execute(run: Run) -> None:
    """Run one handler to an outcome. Never raises: whatever the handler does
    (raise SystemExit, return something unrecordable), the job gets an
    outcome naming the problem and the slot lives on (SPEC §6.1)."""
    ctx = run.ctx
    if ctx.cancelled and ctx.stopping:
        run.outcome = (Record.RELEASE, None, 0.0, None)  # claimed, never started
        return
    tracing, token = run.tracing, None
    if tracing is not None:  # the job's span is current while its handler runs
        run.span, token = tracing.enter(run.row)
    try:
        record, detail, delay, where = _run_handler(run)
    except BaseException as error:  # SystemExit, KeyboardInterrupt, GeneratorExit, ...
        record, detail, delay, where = (Record.RETRY, exception_text(error), None,
                                        exception_traceback(error))
    finally:
        if tracing is not None:  # detached whatever the handler did (or left attached)
            tracing.leave(token)
    run.duration = time.perf_counter() - run.started
    if delay is None:
        delay = run.jitter.delay(run.row.attempts - 1) if record is Record.RETRY else 0.0
    run.outcome = (record, detail, delay, where)


def _run_handler(run: Run) -> tuple[Record, str | None, float | None, str | None]:
    """The handler's outcome: (statement, detail, delay or None for the
    usual one: a Retry's backoff, else none, traceback where it raised)."""
    ctx = run.ctx
    handler = run.handler
    assert handler is not None  # unknown kinds are failed before dispatch
    text = run.row.payload
    try:
        payload: Any = {} if text == "{}" else json.loads(text)
    except RecursionError:
        # jsonb nests deeper than Python decodes: retrying cannot help.
        return (Record.FAIL, error_text("PayloadError", "payload is nested too deeply to decode"),
                None, None)
    except ValueError:
        # An integer of more digits than Python converts (jsonb keeps any):
        # no retry decodes it either.
        return (Record.FAIL, error_text("PayloadError", "payload holds a number too long to "
                                        "decode"), None, None)
    if handler.payload is not None:
        from pydantic import ValidationError

        try:
            payload = handler.payload.model_validate(payload)
        except ValidationError as error:
            where = brief(error, declared_names(handler.payload)) or "invalid payload"
            return Record.FAIL, error_text("ValidationError", where), None, None
        except RecursionError:
            return (Record.FAIL, error_text("PayloadError", "payload is nested too deeply"),
                    None, None)
    try:
        value = handler.fn(ctx, payload)
    except JobCancelled as error:
        if ctx.stopping and not ctx.abandoned:
            return Record.RELEASE, None, None, None  # SPEC §6.1: released, refunded
        if ctx.remaining() <= 0:  # where it noticed is where it was cut
            return cut_at_deadline(run, exception_traceback(error))
        return Record.RETRY, exception_text(error), None, exception_traceback(error)
    except Exception as error:
        return Record.RETRY, exception_text(error), None, exception_traceback(error)
    record, detail = outcome_of(value)
    if record is Record.CONTINUE and isinstance(value, Continue):
        return record, detail, float(value.delay_secs), None
    if isinstance(value, Retry | Fail) and isinstance(value.error, BaseException) \
            and value.error.__traceback__ is not None:
        # `Retry(exc)` of an exception the handler caught: where it was raised.
        return record, detail, None, exception_traceback(value.error)
    return record, detail, None, None


def cut_at_deadline(run: Run, where: str | None) -> Outcome:
    """The outcome of a job cut at its deadline: a Continue from its last
    checkpoint if this claim saved one (SPEC §17), else a Retry that records
    `where` its handler was (SPEC §22)."""
    if run.checkpointed:
        return Record.CONTINUE, None, 0.0, None
    return Record.RETRY, DEADLINE_ERROR, run.jitter.delay(run.row.attempts - 1), where


def handler_stack(run: Run) -> str | None:
    """Where `run`'s handler is now, seen from the coordinator at its
    deadline: the stack of its slot thread (SPEC §22), or None if it is not
    in its handler (never started, or returned meanwhile)."""
    if run.checkpointed:
        return None
    ident = run.thread
    stack = thread_stack(ident) if ident else None
    # Read while the thread ran on: if it left this run meanwhile, the
    # stack may be another job's.
    if stack is not None and run.thread == ident:
        return stack
    # It left its handler as the deadline came (a `ctx.wait` ends there, and
    # its `ctx.check` raises): where its own outcome says it was.
    return run.outcome[3] if run.outcome is not None else None
