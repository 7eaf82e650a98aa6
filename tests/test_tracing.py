"""SPEC §21: tracing, with real parts. A producer process with its own
OpenTelemetry SDK enqueues in a span; `opentelemetry-instrument awc tick`
runs the jobs with the SDK and its OTLP/HTTP exporter configured by OTEL_*
variables; both export to a receiver on 127.0.0.1 in the test, which
decodes the protobuf requests (tests/otlp.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.otlp import CONSUMER, INTERNAL, STATUS_ERROR, Receiver, Span, sdk_env
from tests.support import ROOT, run_awc

# `opentelemetry-instrument`, or the same entry point run by this interpreter
# when the script is not beside it (a venv that borrows another's packages).
_RUN = "from opentelemetry.instrumentation.auto_instrumentation import run; run()"


def instrument_argv() -> list[str]:
    found = shutil.which("opentelemetry-instrument", path=os.pathsep.join(
        [str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    return [found] if found else [sys.executable, "-c", _RUN]


@pytest.fixture
def otlp() -> Iterator[Receiver]:
    receiver = Receiver()
    yield receiver
    receiver.close()


def produce(awc_env: dict[str, str], otlp: Receiver, *kinds: str) -> dict[str, Any]:
    """Enqueue `kinds` in a `checkout` span of a producer process; its ids."""
    done = subprocess.run([sys.executable, "-m", "tests.trace_producer", *kinds],
                          env={**awc_env, **sdk_env(otlp.endpoint, "shop")}, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def traced_tick(awc_env: dict[str, str], otlp: Receiver) -> list[dict[str, Any]]:
    """`opentelemetry-instrument awc tick`; the job events it wrote."""
    done = subprocess.run(
        [*instrument_argv(), sys.executable, "-m", "tick.cli", "tick"],
        env={**awc_env, **sdk_env(otlp.endpoint, "awc-worker")}, cwd=ROOT,
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("event", "").startswith("job_")]


def job_span(otlp: Receiver, kind: str, job_id: int, attempt: int = 1) -> Span:
    for span in otlp.wait(f"process {kind}"):
        attributes = span.attributes
        if attributes["messaging.message.id"] == str(job_id) \
                and attributes["awc.job.attempt"] == attempt:
            return span
    raise AssertionError(f"no span of job {job_id}, attempt {attempt}")


def test_a_first_run_is_a_child_of_the_request_that_enqueued_it(
    awc_env: dict[str, str], otlp: Receiver
) -> None:
    made = produce(awc_env, otlp, "noop", "boom:2", "fail")
    noop, boom, fail = made["ids"]
    events = traced_tick(awc_env, otlp)
    checkout = otlp.wait("checkout")[0]
    assert (checkout.trace_id, checkout.span_id) == (made["trace_id"], made["span_id"])
    run = otlp.wait("awc tick")[0]
    for job_id, kind, outcome in ((noop, "noop", "completed"), (boom, "boom", "retried"),
                                  (fail, "fail", "failed")):
        span = job_span(otlp, kind, job_id)
        assert span.service == "awc-worker" and span.kind == CONSUMER
        assert (span.trace_id, span.parent) == (checkout.trace_id, checkout.span_id)
        assert span.trace_state == "shop=cart-7"  # the producer's tracestate, carried
        assert span.attributes == {
            "messaging.system": "awc", "messaging.operation.type": "process",
            "messaging.operation.name": "process", "messaging.destination.name": "default",
            "messaging.message.id": str(job_id), "awc.job.kind": kind,
            "awc.job.attempt": 1, "awc.job.outcome": outcome}
        # Not under the run: a link leads from the job to the run that ran it.
        assert [(t, s) for t, s, _ in span.links] == [(run.trace_id, run.span_id)]
        event = next(e for e in events if e["job_id"] == job_id)
        assert (event["trace_id"], event["span_id"]) == (span.trace_id, span.span_id)
    ok = job_span(otlp, "noop", noop)
    assert ok.status != STATUS_ERROR and ok.events == []


def test_an_error_is_the_span_status_with_its_exception_event(
    awc_env: dict[str, str], otlp: Receiver
) -> None:
    boom, fail = produce(awc_env, otlp, "boom:2", "fail")["ids"]
    traced_tick(awc_env, otlp)
    raised = job_span(otlp, "boom", boom)
    assert raised.status == STATUS_ERROR
    [(name, attributes)] = raised.events
    assert name == "exception"
    assert attributes["exception.type"] == "RuntimeError"
    assert attributes["exception.message"] == "exploded"
    assert 'raise RuntimeError("exploded")' in attributes["exception.stacktrace"]
    returned = job_span(otlp, "fail", fail)
    assert returned.status == STATUS_ERROR
    assert returned.events == [("exception", {"exception.type": "Fail",
                                              "exception.message": "cannot ever work"})]


def test_the_run_is_a_span_with_the_reports_counts(
    awc_env: dict[str, str], otlp: Receiver
) -> None:
    produce(awc_env, otlp, "noop", "noop", "boom:1", "fail")
    traced_tick(awc_env, otlp)
    [run] = otlp.wait("awc tick")
    assert run.kind == INTERNAL and run.parent == "" and run.service == "awc-worker"
    counts = {k.removeprefix("awc.tick."): v for k, v in run.attributes.items()
              if k.startswith("awc.tick.")}
    assert counts == {"claimed": 4, "completed": 2, "retried": 0, "failed": 2, "cancelled": 0,
                      "released": 0, "discarded": 0, "continued": 0, "rescued": 0,
                      "pruned": 0, "fired": 0, "stop_reason": "drained"}
    assert run.attributes["awc.driver"] == "tick"


def test_a_later_run_starts_a_new_trace_linked_to_the_stored_context(
    awc_env: dict[str, str], otlp: Receiver, conn: psycopg.Connection[Any]
) -> None:
    made = produce(awc_env, otlp, "boom:3", "fail")
    boom, fail = made["ids"]
    traced_tick(awc_env, otlp)  # boom: retried; fail: FAILED
    conn.execute("UPDATE awc.jobs SET run_at = now() WHERE id = %s", (boom,))
    assert run_awc(awc_env, "retry", str(fail)).returncode == 0  # an operator retry
    traced_tick(awc_env, otlp)
    second_run = otlp.wait("awc tick", 2)[1]
    for kind, job_id, attempt in (("boom", boom, 2), ("fail", fail, 1)):
        first = job_span(otlp, kind, job_id)
        later = [s for s in otlp.named(f"process {kind}")
                 if s.attributes["awc.job.attempt"] == attempt and s is not first
                 and s.attributes["messaging.message.id"] == str(job_id)]
        assert len(later) == 1, kind
        span = later[0]
        assert span.parent == "" and span.trace_id not in (made["trace_id"],
                                                           second_run.trace_id)
        links = {attributes["awc.link"]: (t, s) for t, s, attributes in span.links}
        assert links == {"enqueued": (made["trace_id"], made["span_id"]),
                         "run": (second_run.trace_id, second_run.span_id)}


def test_invalid_stored_contexts_are_no_context(
    awc_env: dict[str, str], otlp: Receiver, conn: psycopg.Connection[Any]
) -> None:
    valid = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    stored = ["[1, 2]", '"text"', "{}", '{"traceparent": 5}', '{"traceparent": "garbage"}',
              '{"traceparent": "00-00000000000000000000000000000000-b7ad6b7169203331-01"}',
              '{"traceparent": "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}',
              '{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x"}',
              '{"a": ' * 200 + "1" + "}" * 200,
              json.dumps({"traceparent": valid, "tracestate": "not a list, member"}),
              json.dumps({"traceparent": valid, "tracestate": "k=v"})]
    ids = [conn.execute("INSERT INTO awc.jobs (kind, trace_context) VALUES ('noop', %s) "
                        "RETURNING id", (text,)).fetchone()[0]  # type: ignore[index]
           for text in stored]
    events = traced_tick(awc_env, otlp)
    assert sorted(e["job_id"] for e in events if e["outcome"] == "completed") == ids
    run = otlp.wait("awc tick")[0]
    for job_id in ids[:-2]:  # no context awc can join: a child of the run
        span = job_span(otlp, "noop", job_id)
        assert (span.trace_id, span.parent, span.links) == (run.trace_id, run.span_id, [])
    for job_id, state in ((ids[-2], ""), (ids[-1], "k=v")):  # a bad tracestate alone is dropped
        span = job_span(otlp, "noop", job_id)
        assert (span.trace_id, span.parent) == (valid[3:35], valid[36:52])
        assert span.trace_state == state


def test_the_job_a_schedule_fires_carries_the_firing_runs_context(
    awc_env: dict[str, str], otlp: Receiver, conn: psycopg.Connection[Any]
) -> None:
    assert run_awc(awc_env, "schedules", "add", "every-minute", "--cron", "* * * * *",
                   "--kind", "noop").returncode == 0
    conn.execute("UPDATE awc.schedules SET next_fire_at = date_trunc('minute', now())")
    traced_tick(awc_env, otlp)
    [run] = otlp.wait("awc tick")
    assert run.attributes["awc.tick.fired"] == 1
    row = conn.execute("SELECT id, trace_context FROM awc.jobs").fetchone()
    assert row is not None
    job_id, stored = row
    assert stored["traceparent"][:53] == f"00-{run.trace_id}-{run.span_id}-"  # then its flags
    span = job_span(otlp, "noop", job_id)
    assert (span.trace_id, span.parent) == (run.trace_id, run.span_id)


def test_awc_enqueue_traceparent_is_stored_and_garbage_is_ignored(
    awc_env: dict[str, str], conn: psycopg.Connection[Any]
) -> None:
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    done = run_awc(awc_env, "enqueue", "noop", "--traceparent", parent,
                   "--tracestate", "vendor=x")
    assert done.returncode == 0, done.stderr
    bad = run_awc(awc_env, "enqueue", "noop", "--traceparent", "00-nope")
    assert bad.returncode == 0
    assert bad.stderr.startswith("awc: --traceparent is not a W3C traceparent")
    assert "00-nope" not in bad.stderr
    rows = conn.execute("SELECT id, trace_context FROM awc.jobs ORDER BY id").fetchall()
    assert [r[1] for r in rows] == [{"traceparent": parent, "tracestate": "vendor=x"}, None]
    assert [r[0] for r in rows] == [int(done.stdout), int(bad.stdout)]
    shown = json.loads(run_awc(awc_env, "jobs", "show", done.stdout.strip()).stdout)
    assert shown["trace_context"] == {"traceparent": parent, "tracestate": "vendor=x"}


@pytest.mark.parametrize("name, at", [("process noop", "start"), ("process noop", "end"),
                                      ("awc ", "start"), ("awc ", "end")])
def test_a_span_processor_that_raises_never_decides_a_job_nor_ends_the_run(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], name: str, at: str,
) -> None:
    # The host's provider is the host's code: a processor that raised as a
    # job's span started dead-lettered the job unrun; as it ended, the tick
    # exited 1 calling it a database error, with the jobs' outcomes unsaid
    # (a loop left one RUNNING until its lease ran out); as the run's span
    # ended, the command failed. Now the span is dropped and the process
    # says so once, by the error's type.
    from tick.producer import enqueue_many

    ids = enqueue_many(conn, [{"kind": "noop"}] * 3 + [{"kind": "ledger"}])
    env = {**awc_env, "AWC_HANDLER_MODULES": "tests.broken_tracing,tests.kinds",
           "AWC_TEST_BROKEN_SPAN": name, "AWC_TEST_BROKEN_AT": at}
    done = run_awc(env, "tick", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["completed"] == 4
    states = conn.execute("SELECT DISTINCT state FROM awc.jobs WHERE id = ANY(%s)",
                          (ids,)).fetchall()
    assert states == [("COMPLETED",)]
    told = [line for line in done.stderr.splitlines() if "tracing:" in line]
    assert len(told) == 1 and "RuntimeError" in told[0] and "broke" not in told[0], done.stderr
    finished = conn.execute("SELECT claimed, completed FROM awc.ticks").fetchall()
    assert finished == [(4, 4)]
