"""SPEC §21: what a job's trace context is, where it is captured, and how
the engine's spans read it, in this process: the W3C rules as tables,
enqueue's capture with the OpenTelemetry API alone, and the engine run
with a real SDK tracer provider of the test's own (handed to the engine in
place of the global one, so no other test runs traced).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, TraceFlags, TraceState

from tests.support import ROOT, Context, registry_with
from tick import Continue, JobContext, enqueue, enqueue_many
from tick import tick as run_tick
from tick.trace_context import read_stored, stored_text, valid_traceparent, valid_tracestate

TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.mark.parametrize(("value", "valid"), [
    (TP, True),
    ("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-later", True),  # a later version
    (TP + "-x", False),  # version 00 has no more fields
    # a later version's fields are the header's alphabet: no control, no space
    ("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-\x1b]0;x\x07", False),
    ("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-a\nb", False),
    ("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-a b", False),
    ("ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", False),
    ("00-00000000000000000000000000000000-b7ad6b7169203331-01", False),
    ("00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", False),
    ("00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", False),  # uppercase
    ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333-01", False),
    (" " + TP, False), ("", False), (None, False), (5, False), ("x" * 10_000, False),
])
def test_a_traceparent_is_w3c_or_nothing(value: Any, valid: bool) -> None:
    assert valid_traceparent(value) is valid


@pytest.mark.parametrize(("value", "valid"), [
    ("vendor=x", True), ("a=1,b@tenant=2", True), ("a=1, ,b=2", True), ("", True),
    ("A=1", False), ("a=", False), ("a=1=2", False), ("a", False),
    (",".join(f"k{n}=v" for n in range(33)), False), ("a=" + "v" * 600, False), (7, False),
])
def test_a_tracestate_is_a_w3c_list_or_dropped(value: Any, valid: bool) -> None:
    assert valid_tracestate(value) is valid


@pytest.mark.parametrize("text", [
    None, "", "null", "5", '"text"', "[1]", "{}", '{"traceparent": 5}',
    '{"traceparent": "00-x"}', "not json", '{"a": ' * 5000 + "1" + "}" * 5000,
    json.dumps({"traceparent": TP, "pad": "x" * 5000}),
])
def test_a_stored_value_awc_cannot_join_is_no_context(text: str | None) -> None:
    assert read_stored(text) is None


def test_a_stored_value_keeps_its_tracestate_only_when_valid() -> None:
    assert read_stored(json.dumps({"traceparent": TP, "tracestate": "k=v"})) == {
        "traceparent": TP, "tracestate": "k=v"}
    assert read_stored(json.dumps({"traceparent": TP, "tracestate": "bad state"})) == {
        "traceparent": TP}
    assert stored_text("garbage", "k=v") is None


def stored(conn: psycopg.Connection[Any]) -> list[Any]:
    return [r[0] for r in conn.execute("SELECT trace_context FROM awc.jobs ORDER BY id")]


def test_enqueue_captures_the_current_span_unless_given_one(
    conn: psycopg.Connection[Any]
) -> None:
    here = SpanContext(0xABC, 0xDEF, is_remote=False, trace_flags=TraceFlags(1),
                       trace_state=TraceState([("shop", "7")]))
    mine = {"traceparent": f"00-{0xABC:032x}-{0xDEF:016x}-01", "tracestate": "shop=7"}
    enqueue(conn, "noop")  # no span: no context
    with trace.use_span(trace.NonRecordingSpan(here)):
        enqueue(conn, "noop")
        enqueue(conn, "noop", traceparent=TP)
        enqueue(conn, "noop", traceparent="garbage")  # given, invalid: ignored, not replaced
        enqueue_many(conn, [{"kind": "noop"}, {"kind": "noop", "traceparent": TP,
                                               "tracestate": "k=v"}])
        enqueue_many(conn, [{"kind": "noop"}] * 70)  # by COPY
        enqueue_many(conn, [{"kind": "noop", "traceparent": "00-bad"}] * 70)
    enqueue_many(conn, [{"kind": "noop"}] * 70)  # by COPY, no context
    got = stored(conn)
    assert got[:6] == [None, mine, {"traceparent": TP}, None, mine,
                       {"traceparent": TP, "tracestate": "k=v"}]
    assert got[6:76] == [mine] * 70 and got[76:] == [None] * 140


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """A real SDK provider, handed to the engine as its tracer's."""
    import tick.engine.spans as engine_spans

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(engine_spans, "tracer", lambda: provider.get_tracer("awc"))
    yield exporter
    provider.shutdown()


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def links_of(span: ReadableSpan) -> dict[str, tuple[int, int]]:
    return {str((link.attributes or {})["awc.link"]): (link.context.trace_id,
                                                        link.context.span_id)
            for link in span.links}


def test_a_continued_or_rescued_job_runs_again_in_a_new_linked_trace(
    conn: psycopg.Connection[Any], spans: InMemorySpanExporter
) -> None:
    def hands_back(ctx: JobContext, payload: dict[str, Any]) -> Any:
        return Continue(state={"n": 1}) if ctx.saved is None else None

    registry = registry_with(hands_back=hands_back, noop=lambda ctx, payload: None)
    continued = enqueue(conn, "hands_back", traceparent=TP)
    rescued = enqueue(conn, "noop", traceparent=TP)
    conn.execute("UPDATE awc.jobs SET state = 'RUNNING', attempts = 1, claim_token = "
                 "gen_random_uuid(), locked_until = now() - interval '1 s' WHERE id = %s",
                 (rescued,))
    run_tick(conn, registry=registry, max_secs=10)  # rescues, runs both; hands_back continues
    run_tick(conn, registry=registry, max_secs=10)
    first, later = sorted(named(spans, "process hands_back"), key=lambda s: s.start_time or 0)
    assert first.parent is not None and f"{first.parent.span_id:016x}" == TP[36:52]
    assert dict(first.attributes or {})["awc.job.outcome"] == "continued"
    [again] = named(spans, "process noop")
    for span in (later, again):
        assert span.parent is None and span.context.trace_id != int(TP[3:35], 16)
        assert links_of(span)["enqueued"] == (int(TP[3:35], 16), int(TP[36:52], 16))
    assert dict(again.attributes or {})["awc.job.attempt"] == 2
    assert {str(continued), str(rescued)} == {
        dict(s.attributes or {})["messaging.message.id"] for s in (later, again)}


def test_a_handler_runs_in_its_jobs_span_and_its_enqueues_carry_it(
    conn: psycopg.Connection[Any], spans: InMemorySpanExporter
) -> None:
    seen: list[SpanContext] = []

    def parent(ctx: JobContext, payload: dict[str, Any]) -> None:
        seen.append(trace.get_current_span().get_span_context())
        with trace.get_tracer("mine").start_as_current_span("inside"):
            pass
        with psycopg.connect(conn.info.dsn, autocommit=True) as own:
            enqueue(own, "noop")  # a child job: its context is the one at its enqueue

    registry = registry_with(parent=parent, noop=lambda ctx, payload: None)
    enqueue(conn, "parent")
    enqueue(conn, "nobody_handles_this")
    run_tick(conn, registry=registry, max_secs=10)
    [job] = named(spans, "process parent")
    [run] = named(spans, "awc tick")
    assert job.parent is not None and job.parent.span_id == run.context.span_id
    assert seen == [job.context]
    assert trace.get_current_span().get_span_context().is_valid is False  # nothing leaked here
    child = stored(conn)[2]["traceparent"]
    assert child[:53] == f"00-{job.context.trace_id:032x}-{job.context.span_id:016x}-"
    [unknown] = named(spans, "process nobody_handles_this")
    assert dict(unknown.attributes or {})["awc.job.outcome"] == "failed"
    assert unknown.status.status_code == trace.StatusCode.ERROR
    assert [dict(e.attributes or {})["exception.type"] for e in unknown.events] == ["UnknownKind"]


def test_a_context_a_handler_leaves_attached_does_not_outlive_its_job(
    conn: psycopg.Connection[Any], spans: InMemorySpanExporter
) -> None:
    from opentelemetry import context

    stray = SpanContext(0x5, 0x6, is_remote=True)
    seen: list[SpanContext] = []

    def leaky(ctx: JobContext, payload: dict[str, Any]) -> None:
        context.attach(trace.set_span_in_context(trace.NonRecordingSpan(stray)))  # never detached

    def looks(ctx: JobContext, payload: dict[str, Any]) -> None:
        seen.append(trace.get_current_span().get_span_context())

    registry = registry_with(leaky=leaky, looks=looks)
    enqueue(conn, "leaky", priority=1)
    enqueue(conn, "looks")
    run_tick(conn, registry=registry, max_secs=10, concurrency=1)  # one slot thread, in turn
    [looked] = named(spans, "process looks")
    assert seen == [looked.context]


def test_each_busy_stretch_of_a_loop_is_a_span(
    db_url: str, conn: psycopg.Connection[Any], spans: InMemorySpanExporter
) -> None:
    import threading

    from tests.support import wait_for
    from tick.db import connect
    from tick.engine.api import Engine, RunSpec
    from tick.history import TickStart

    engine = Engine(lambda: connect(db_url), registry=registry_with(noop=lambda c, p: None))
    spec = RunSpec(history=TickStart("loop", "w-1"), continuous=True, poll_interval_s=0.1)
    stop = threading.Event()
    runner = threading.Thread(target=engine.run, args=(spec, stop))
    runner.start()
    try:
        for n in (1, 2):  # two stretches, the queue drained between them
            enqueue_many(conn, [{"kind": "noop"}] * 3)
            wait_for(lambda n=n: len(named(spans, "awc loop")) == n, timeout=20,  # type: ignore[misc]
                     what=f"stretch {n}'s span")
    finally:
        stop.set()
        engine.wake()
        runner.join(30)
        engine.close()
    stretches = named(spans, "awc loop")
    assert [dict(s.attributes or {})["awc.tick.completed"] for s in stretches] == [3, 3]
    jobs = named(spans, "process noop")
    assert sorted(j.parent.span_id for j in jobs if j.parent) == sorted(
        [s.context.span_id for s in stretches] * 3)


def test_lambda_job_events_carry_the_span_ids_beside_the_loggers_keys(
    lam: Any, conn: psycopg.Connection[Any], spans: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    out = io.StringIO()  # the powertools Logger's stream, whichever test created it
    monkeypatch.setattr(lam.logger.registered_handler, "stream", out)
    job_id = enqueue(conn, "noop", traceparent=TP)
    lam.handler({}, Context(10))
    lines = [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]
    event = next(line for line in lines if line.get("event") == f"job_{job_id}")
    [span] = named(spans, "process noop")
    assert (event["trace_id"], event["span_id"]) == (TP[3:35], f"{span.context.span_id:016x}")
    assert event["function_request_id"]  # the powertools Logger's own keys, alongside
    [run] = named(spans, "awc lambda")
    assert dict(run.attributes or {})["awc.tick.completed"] == 1


def test_without_a_provider_awc_tick_imports_no_opentelemetry(db_url: str) -> None:
    probe = ("import sys; from tick.db import connect; from tick import enqueue, tick; "
             "c = connect(sys.argv[1]); enqueue(c, 'k'); r = tick(c, max_secs=5); "
             "print(r.claimed, any(v is not None for m, v in sys.modules.items() "
             "if m.startswith('opentelemetry')))")
    done = subprocess.run([sys.executable, "-c", probe, db_url], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.stdout.split() == ["1", "False"], done.stderr
    # The API absent altogether: enqueue and tick as ever.
    blocked = "import sys; sys.modules['opentelemetry'] = None; " + probe.split("; ", 1)[1]
    done = subprocess.run([sys.executable, "-c", blocked, db_url], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["1", "False"], done.stderr
