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



BIGINT_MIN = -(2**63)


@pytest.mark.parametrize("claim", ["walk", "queue"])
@pytest.mark.parametrize("how", ["passed, due later", "left ready, locked"])
def test_a_job_at_the_least_id_stops_no_claim(
        db_url: str, conn: psycopg.Connection[Any], claim: str, how: str) -> None:
    """A row of plain SQL with id -9223372036854775808: the walk's cursor is
    the key just before a job it passes over (due later) or leaves ready
    (another transaction holds it), and `id - 1` made every claim fail
    with "bigint out of range": nothing ran."""
    from tick.db import connect

    if how == "passed, due later":
        conn.execute("INSERT INTO awc.jobs (id, kind, priority, run_at) VALUES "
                     "(%s, 'noop', 5, now() + interval '1 hour')", (BIGINT_MIN,))
    else:
        conn.execute("INSERT INTO awc.jobs (id, kind, priority) VALUES (%s, 'noop', 5)",
                     (BIGINT_MIN,))
    ids = enqueue_many(conn, [{"kind": "noop"} for _ in range(10)])
    with connect(db_url) as holder, holder.transaction():
        if how == "left ready, locked":
            holder.execute("SELECT 1 FROM awc.jobs WHERE id = %s FOR UPDATE", (BIGINT_MIN,))
        report = tick(conn, registry=registry_with(noop=done), max_secs=20, concurrency=2,
                      queues=["default"] if claim == "queue" else None)
    assert report.completed == 10, report
    assert {job_row(conn, i)["state"] for i in ids} == {"COMPLETED"}
    assert job_row(conn, BIGINT_MIN)["state"] == "PENDING"
