"""SPEC §4.2 "No row stops the queue": a job's counters written at an
integer's limits by hand. Every claim statement added one to `attempts`, so
one PENDING row at 2,147,483,647 made every claim fail with "integer out
of range" (no job ran; a loop's tick runner died); a Continue of a job whose
`continues` was there failed its whole batch of outcomes."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.support import job_row, registry_with
from tick import Complete, Continue, JobContext, tick
from tick.producer import enqueue_many

pytestmark = pytest.mark.timeout(60)

INT_MAX = 2**31 - 1


def done(ctx: JobContext, payload: Any) -> Complete:
    return Complete({"attempts": ctx.attempts})


@pytest.mark.parametrize("claim", ["walk", "queue", "key", "lane"])
def test_a_job_at_the_attempts_limit_stops_no_claim(
        conn: psycopg.Connection[Any], claim: str) -> None:
    key = "tenant" if claim == "key" else None
    ids = enqueue_many(conn, [{"kind": "noop", "key": key} for _ in range(5)])
    conn.execute("UPDATE awc.jobs SET attempts = %s WHERE id = %s", (INT_MAX, ids[2]))
    if claim == "lane":  # a kind limit that may bind: the lane claim (decision 0018)
        conn.execute("INSERT INTO awc.limits (scope, name, max_running) VALUES ('kind', 'noop', 3)")
    report = tick(conn, registry=registry_with(noop=done), max_secs=20, concurrency=2,
                  queues=["default"] if claim == "queue" else None)
    assert report.completed == 5, report
    assert job_row(conn, ids[2])["attempts"] == INT_MAX
    assert {job_row(conn, i)["state"] for i in ids} == {"COMPLETED"}


def test_a_continue_at_the_continues_limit_sinks_no_batch(conn: psycopg.Connection[Any]) -> None:
    ids = enqueue_many(conn, [{"kind": "step"} for _ in range(4)])
    conn.execute("UPDATE awc.jobs SET continues = %s WHERE id = %s", (INT_MAX, ids[0]))

    def step(ctx: JobContext, payload: Any) -> Complete | Continue:
        return Continue({"at": 1}) if ctx.saved is None else Complete({})

    report = tick(conn, registry=registry_with(step=step), max_secs=20, concurrency=4)
    assert report.completed == 4, report
    assert job_row(conn, ids[0])["continues"] == INT_MAX

