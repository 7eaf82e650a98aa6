"""Spans (SPEC §21): a run of the engine is a span `awc <driver>`, and each
run of a job a CONSUMER span `process <kind>` that joins the trace of the
request that enqueued it (docs/decisions/0032).

awc never configures a tracer provider: the host does (`opentelemetry-
instrument`, the ADOT Lambda layer, a handler module). Until one is set,
nothing here imports OpenTelemetry or creates an object: `tracer()` finds
the API absent from `sys.modules`, or its provider the API's placeholder,
and every caller skips its tracing on a None.

Who calls what: the coordinator opens and ends the run's span (`begin`,
`finish`) and attaches it around the maintenance pass, so the jobs a
schedule fires carry its context; the slot thread starts a job's span as
its handler starts (`RunTrace.enter`) and keeps it current while the
handler runs, so what the handler does is its child and detached after,
whatever the handler did; the flush notes a Retry's or Fail's error on it;
the settle step, which knows the outcome's label, ends it.

The provider and its span processors are the host's code, and may raise.
Tracing never decides a job's outcome nor ends a run: every call into
OpenTelemetry here is guarded (`guarded`), a failed one drops that span
(or the run's tracing), and the process says so once in its log.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tick.events import event_kind
from tick.report import COUNTERS
from tick.trace_context import read_stored

if TYPE_CHECKING:
    from tick.engine.spec import RunSpec
    from tick.queue import ClaimedRow
    from tick.report import TickReport

# bench/tracing.py turns the code off to measure what it costs when no
# provider is configured; nothing else changes it.
ENABLED = True
# Labels whose span has status ERROR, with the error as an exception event.
ERROR_LABELS = frozenset({"failed", "retried"})

_cached: tuple[Any, Any] | None = None  # (provider, awc's tracer from it)
_told = False  # the process has logged that a call into tracing failed


@contextlib.contextmanager
def guarded(doing: str) -> Iterator[None]:
    """Run a call into OpenTelemetry; if it raises, go on without it, and
    log the first such failure of the process: its type, never its text
    (a span processor's message may hold anything)."""
    global _told
    try:
        yield
    except Exception as error:
        if not _told:
            _told = True
            logging.getLogger("tick.tracing").warning(
                "tracing: %s failed (%s); spans may be missing, jobs and runs are not "
                "affected", doing, type(error).__name__)


def tracer() -> Any:
    """awc's tracer from the process's tracer provider, or None when there
    is none: the API not imported by anyone, or no provider set."""
    global _cached
    if not ENABLED:
        return None
    api = sys.modules.get("opentelemetry.trace")
    if api is None:
        return None
    provider = api.get_tracer_provider()
    if isinstance(provider, api.ProxyTracerProvider | api.NoOpTracerProvider):
        return None
    cached = _cached
    if cached is not None and cached[0] is provider:
        return cached[1]
    found = None
    with guarded("getting awc's tracer"):
        found = provider.get_tracer("awc")
    _cached = (provider, found)  # a provider that failed once is not asked again
    return found


def driver_of(spec: RunSpec) -> str:
    """The run's driver as its history row names it (`tick` for a library call)."""
    return spec.history.driver if spec.history is not None else "tick"


class JobSpan:
    """One run of a job as a span: started by its slot, ended at its settle."""

    __slots__ = ("failure", "ids", "span")

    def __init__(self, span: Any) -> None:
        self.span = span
        # (error text, traceback) of a Retry or Fail, as the error history
        # keeps them (SPEC §22): the exception event, if the label is an error.
        self.failure: tuple[str | None, str | None] | None = None
        found = span.get_span_context()
        # The job event's trace_id and span_id (SPEC §21), while tracing is active.
        self.ids = ((f"{found.trace_id:032x}", f"{found.span_id:016x}")
                    if found.is_valid else None)

    def failed(self, error: str | None, traceback: str | None) -> None:
        """The outcome recorded is a Retry or a Fail with this error."""
        self.failure = (error, traceback)

    def end(self, label: str) -> None:
        """The outcome is recorded as `label` (SPEC §9): the span ends."""
        with guarded("ending a job's span"):
            self._end(label)

    def _end(self, label: str) -> None:
        span = self.span
        span.set_attribute("awc.job.outcome", label)
        if label in ERROR_LABELS:
            from opentelemetry.trace import Status, StatusCode

            error, traceback = self.failure or (None, None)
            name, _, message = (error or "Error").partition(": ")
            event = {"exception.type": name, "exception.message": message}
            if traceback:
                event["exception.stacktrace"] = traceback
            span.add_event("exception", event)
            span.set_status(Status(StatusCode.ERROR, name))
        span.end()


class RunTrace:
    """The span of one run of the engine (a tick, a Lambda invocation, a
    loop's busy stretch, a maintenance pass) and the job spans it starts."""

    def __init__(self, tracer: Any, driver: str, worker_id: str) -> None:
        from opentelemetry import context
        from opentelemetry.trace import SpanKind, set_span_in_context

        # Looked up once per run, not per job: the slot threads' hot path.
        self._attach, self._detach = context.attach, context.detach
        self._in_context = set_span_in_context
        self.tracer = tracer
        # A child of whatever is current: the ADOT layer's invocation span
        # on Lambda, nothing (a new trace) for `awc tick` and the loop.
        self.span = tracer.start_span(f"awc {driver}", kind=SpanKind.INTERNAL, attributes={
            "awc.driver": driver, "awc.worker.id": worker_id})
        self.context = set_span_in_context(self.span)

    def start_job(self, row: ClaimedRow) -> JobSpan | None:
        """A job's span (None if the tracer failed to start it). Its first
        run is a child of the context stored at its enqueue; a later run
        starts a new trace linked to it (it may run long after that request
        ended); a job with no context it can join is a child of the run.
        Every job span not under the run links to it."""
        with guarded("starting a job's span"):
            return self._start_job(row)
        return None

    def _start_job(self, row: ClaimedRow) -> JobSpan:
        from opentelemetry.trace import SpanKind

        parent, links = self.context, []
        stored = read_stored(row.trace) if row.trace is not None else None
        if stored is not None:
            from opentelemetry import trace
            from opentelemetry.context import Context
            from opentelemetry.trace import Link
            from opentelemetry.trace.propagation.tracecontext import (
                TraceContextTextMapPropagator,
            )

            remote = TraceContextTextMapPropagator().extract(stored)
            enqueued = trace.get_current_span(remote).get_span_context()
            if enqueued.is_valid:
                run = self.span.get_span_context()
                if row.rerun:
                    parent = Context()
                    links = [Link(enqueued, {"awc.link": "enqueued"}),
                             Link(run, {"awc.link": "run"})]
                else:
                    parent, links = remote, [Link(run, {"awc.link": "run"})]
        kind = event_kind(row.kind)
        span = self.tracer.start_span(
            f"process {kind}", context=parent, kind=SpanKind.CONSUMER, links=links,
            attributes={
                "messaging.system": "awc",
                "messaging.operation.type": "process",
                "messaging.operation.name": "process",
                "messaging.destination.name": row.queue,
                "messaging.message.id": str(row.id),
                "awc.job.kind": kind,
                "awc.job.attempt": row.attempts,
            })
        return JobSpan(span)

    def enter(self, row: ClaimedRow) -> tuple[JobSpan | None, Any]:
        """On the slot thread, as the handler starts: its span, current on
        this thread until `leave` (the token to give it); (None, None) if
        the tracer failed."""
        job = self.start_job(row)
        if job is None:
            return None, None
        with guarded("making a job's span current"):
            return job, self._attach(self._in_context(job.span))
        return job, None

    def leave(self, token: Any) -> None:
        """The handler returned: its span is no longer current on this thread
        (the context before `enter`, whatever the handler attached since)."""
        if token is not None:
            with guarded("leaving a job's span"):
                self._detach(token)

    def end(self, report: TickReport | None, error: BaseException | None = None) -> None:
        """The run is over: its report's counts, and its error if it failed."""
        with guarded("ending the run's span"):
            self._end(report, error)

    def _end(self, report: TickReport | None, error: BaseException | None) -> None:
        span = self.span
        if report is not None:
            for counter in COUNTERS:
                span.set_attribute(f"awc.tick.{counter}", getattr(report, counter))
            span.set_attribute("awc.tick.stop_reason", report.stop_reason)
        if error is not None:
            from opentelemetry.trace import Status, StatusCode

            from tick.redaction import redacted

            name = type(error).__name__
            span.add_event("exception", {"exception.type": name,
                                         "exception.message": redacted(str(error))[:1000]})
            span.set_status(Status(StatusCode.ERROR, name))
        span.end()


def begin(driver: str, worker_id: str) -> RunTrace | None:
    """The span of a run that starts now, or None while tracing is off."""
    found = tracer()
    if found is None:
        return None
    with guarded("starting the run's span"):
        return RunTrace(found, driver, worker_id)
    return None


def finish(trace: RunTrace | None, report: TickReport | None,
           error: BaseException | None = None) -> RunTrace | None:
    """End a run's span, if it has one; None, the span the run holds after."""
    if trace is not None:
        trace.end(report, error)
    return None


def abandoned(job: JobSpan | None) -> None:
    """The run failed with this job's outcome unrecorded (its lease recovers
    the job): its span ends without an outcome."""
    if job is not None:
        with guarded("ending a job's span"):
            job.span.end()


@contextlib.contextmanager
def maintenance_pass(driver: str, worker_id: str) -> Iterator[list[TickReport]]:
    """A maintenance pass that is a run of its own (the loop's maintenance
    part, `awc maintenance tick`) as a span `awc <driver>`, current while it
    runs (the jobs it fires carry it); the caller appends the pass's report."""
    trace = begin(driver, worker_id)
    reported: list[TickReport] = []
    try:
        with attached(trace):
            yield reported
    except BaseException as error:
        finish(trace, None, error)
        raise
    finish(trace, reported[-1] if reported else None)


@contextlib.contextmanager
def attached(trace: RunTrace | None) -> Iterator[None]:
    """The run's span is current on this thread meanwhile (the maintenance
    pass: a schedule's fired jobs carry its context), and detached after."""
    if trace is None:
        yield
        return
    from opentelemetry import context

    token = None
    with guarded("making the run's span current"):
        token = context.attach(trace.context)
    try:
        yield
    finally:
        if token is not None:
            with guarded("leaving the run's span"):
                context.detach(token)
