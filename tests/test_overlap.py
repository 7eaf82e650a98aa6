"""docs/decisions/0037: a drain's round trips overlap on two connections and
keep every guarantee of one: each job runs and is recorded once, max_jobs
holds with claims in flight, the history row counts what happened, a stop
hands back what a claim in flight brought, and a lost second connection is
the run's failure like a lost first one, reopened by the next run."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import psycopg
import pytest

from tests.support import registry_with
from tick import JobContext
from tick.db import connect
from tick.engine.api import Engine, RunSpec, maintenance_for
from tick.errors import DatabaseError
from tick.history import TickStart
from tick.producer import enqueue_many

SLOTS = 64  # the fewest with which round trips overlap (tick/engine/wire.py)


class Counted:
    """A handler that counts the jobs it ran, and an engine with two lanes."""

    def __init__(self, db_url: str, conn: psycopg.Connection[Any],
                 then: Any = None) -> None:
        self.seen: Counter[int] = Counter()
        self.lock = threading.Lock()
        self.opened: list[psycopg.Connection[Any]] = []
        self.db_url = db_url
        self.then = then

        def count(ctx: JobContext, payload: Any) -> None:
            with self.lock:
                self.seen[ctx.job_id] += 1
                n = sum(self.seen.values())
            if self.then is not None:
                self.then(n)

        def second() -> psycopg.Connection[Any]:
            opened = connect(db_url)
            self.opened.append(opened)
            return opened

        self.engine = Engine(lambda: conn, registry=registry_with(count=count),
                             maintenance=maintenance_for(86400.0), lane_connect=second)

    def run(self, stop: threading.Event | None = None, **spec: Any) -> Any:
        spec.setdefault("concurrency", SLOTS)
        return self.engine.run(RunSpec(deadline=time.monotonic() + 60, **spec),
                               stop or threading.Event())


def states(conn: psycopg.Connection[Any]) -> dict[str, int]:
    rows = conn.execute("SELECT state, count(*) FROM awc.jobs GROUP BY state").fetchall()
    return {str(state): int(n) for state, n in rows}


def test_a_drain_overlaps_on_a_second_connection_and_runs_each_job_once(
    conn: psycopg.Connection[Any], db_url: str
) -> None:
    ids = enqueue_many(conn, [{"kind": "count"}] * 3000)
    counted = Counted(db_url, conn)
    report = counted.run(max_jobs=10_000, history=TickStart("tick", "w-lanes"))
    assert (report.claimed, report.completed, report.stop_reason) == (3000, 3000, "drained")
    assert sorted(counted.seen) == sorted(ids) and set(counted.seen.values()) == {1}
    assert len(counted.opened) == 1  # the second lane's connection, once
    assert states(conn) == {"COMPLETED": 3000}
    row = conn.execute("SELECT claimed, completed, stop_reason, finished_at IS NOT NULL "
                       "FROM awc.ticks ORDER BY id DESC LIMIT 1").fetchone()
    assert row == (3000, 3000, "drained", True)
    counted.engine.close()
    assert counted.opened[0].closed


def test_a_short_queue_never_opens_the_second_connection(
    conn: psycopg.Connection[Any], db_url: str
) -> None:
    enqueue_many(conn, [{"kind": "count"}] * 20)
    counted = Counted(db_url, conn)
    assert counted.run().completed == 20
    assert counted.run().claimed == 0  # an empty tick
    assert counted.opened == []


@pytest.mark.parametrize("max_jobs", [300, 1000])
def test_max_jobs_holds_with_claims_in_flight(
    conn: psycopg.Connection[Any], db_url: str, max_jobs: int
) -> None:
    enqueue_many(conn, [{"kind": "count"}] * 2000)
    counted = Counted(db_url, conn)
    report = counted.run(max_jobs=max_jobs)
    assert (report.claimed, report.completed, report.stop_reason) == (
        max_jobs, max_jobs, "max_jobs")
    assert states(conn) == {"COMPLETED": max_jobs, "PENDING": 2000 - max_jobs}


def test_a_stop_mid_drain_leaves_no_job_running(
    conn: psycopg.Connection[Any], db_url: str
) -> None:
    stop = threading.Event()
    enqueue_many(conn, [{"kind": "count"}] * 5000)
    counted = Counted(db_url, conn, then=lambda n: n == 500 and stop.set())
    report = counted.run(stop, max_jobs=10_000, stop_grace_secs=5)
    assert report.stop_reason == "stopped"
    found = states(conn)
    assert "RUNNING" not in found, found
    assert found["COMPLETED"] == report.completed == sum(counted.seen.values())
    assert report.claimed == report.completed + report.released
    assert set(counted.seen.values()) == {1}


def test_a_lost_second_connection_fails_the_run_and_the_next_reopens_it(
    conn: psycopg.Connection[Any], db_url: str
) -> None:
    def cut(n: int) -> None:
        if n == 400 and counted.opened:
            with connect(db_url) as other:
                other.execute("SELECT pg_terminate_backend(%s)",
                              (counted.opened[-1].info.backend_pid,))

    enqueue_many(conn, [{"kind": "count"}] * 4000)
    counted = Counted(db_url, conn, then=cut)
    with pytest.raises(DatabaseError) as lost:
        counted.run(max_jobs=10_000)
    assert lost.value.connection_lost
    counted.then = None
    conn.execute("UPDATE awc.jobs SET locked_until = now() - interval '1 second' "
                 "WHERE state = 'RUNNING'")  # left to the leases: rescued now
    report = counted.run(max_jobs=10_000)
    assert report.stop_reason == "drained"
    assert states(conn) == {"COMPLETED": 4000}
    assert len(counted.opened) == 2  # reopened
