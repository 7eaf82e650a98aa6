"""SPEC §14 (decision 0040): a tick's maintenance pass asks whether a job may
be ready (`ready_any.sql`), and a tick with nothing to do ends without its
claim. The question may say yes wrongly (then the claim finds nothing), never
no wrongly: every job due now, at any priority, behind any number of jobs due
later, rescued or fired by the same pass, is claimed by that tick."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from tests.exchanges import exchanges
from tests.support import registry_with
from tick import tick
from tick.producer import enqueue, enqueue_many
from tick.statements import sql

pytestmark = pytest.mark.timeout(120)

LATER = datetime.now(UTC) + timedelta(hours=1)


def ready(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute(sql("ready_any")).fetchone()
    return bool(row and row[0])


def run(conn: psycopg.Connection[Any]) -> Any:
    return tick(conn, registry=registry_with(noop=lambda ctx, payload: None), max_secs=30)


def test_an_empty_queue_or_one_of_later_jobs_is_not_ready_and_its_tick_claims_nothing(
    conn: psycopg.Connection[Any],
) -> None:
    assert ready(conn) is False
    enqueue_many(conn, [{"kind": "noop", "run_at": LATER, "priority": p % 3}
                        for p in range(300)])
    assert ready(conn) is False
    run(conn)  # the first pass may prune: the count is the second's
    assert exchanges(conn, lambda: run(conn)) == 1  # the maintenance pass, no claim
    report = run(conn)
    assert (report.claimed, report.stop_reason) == (0, "drained")


@pytest.mark.parametrize("priorities", [2, 64, 70])
def test_a_due_job_behind_later_jobs_of_higher_priorities_is_claimed(
    conn: psycopg.Connection[Any], priorities: int,
) -> None:
    """Past 64 priorities the probe stops looking and says yes."""
    enqueue_many(conn, [{"kind": "noop", "run_at": LATER, "priority": 100 - p}
                        for p in range(priorities) for _ in range(3)])
    job = enqueue(conn, "noop", priority=100 - priorities)  # the lowest, due now
    assert ready(conn) is True
    report = run(conn)
    assert report.claimed == 1 and report.completed == 1
    state = conn.execute("SELECT state FROM awc.jobs WHERE id = %s", (job,)).fetchone()
    assert state is None or state == ("COMPLETED",)


def test_instants_at_the_ends_of_time_are_read_as_they_compare(
    conn: psycopg.Connection[Any],
) -> None:
    enqueue(conn, "noop")
    conn.execute("UPDATE awc.jobs SET run_at = 'infinity'")
    assert ready(conn) is False
    conn.execute("UPDATE awc.jobs SET run_at = '-infinity'")
    assert ready(conn) is True


def test_running_jobs_and_waiting_children_are_not_ready(
    conn: psycopg.Connection[Any],
) -> None:
    parent = enqueue(conn, "noop", run_at=LATER)
    enqueue(conn, "noop", after=[parent])  # waits for its parent
    assert ready(conn) is False
    conn.execute("UPDATE awc.jobs SET run_at = now() - interval '1 s'")
    assert ready(conn) is True  # the parent, not its child
    conn.execute("UPDATE awc.jobs SET state = 'RUNNING', locked_until = now() + interval '1 h',"
                 " attempts = 1 WHERE id = %s", (parent,))
    assert ready(conn) is False


def test_a_job_the_pass_rescues_is_claimed_by_the_same_tick(
    conn: psycopg.Connection[Any],
) -> None:
    job = enqueue(conn, "noop")
    conn.execute("UPDATE awc.jobs SET state = 'RUNNING', attempts = 1, "
                 "locked_until = now() - interval '1 s' WHERE id = %s", (job,))
    assert ready(conn) is False  # before the rescue
    report = run(conn)
    assert (report.rescued, report.claimed, report.completed) == (1, 1, 1)


def test_the_probe_reads_a_few_pages_whatever_the_backlog_of_later_jobs(
    conn: psycopg.Connection[Any],
) -> None:
    enqueue_many(conn, [{"kind": "noop", "run_at": LATER, "priority": p % 4}
                        for p in range(20_000)])
    conn.execute("ANALYZE awc.jobs")
    conn.execute(sql("pin_plans").replace("true)", "false)"))  # as the pass runs it
    plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql("ready_any")
                        ).fetchone()
    assert plan is not None
    top = plan[0][0]["Plan"]
    assert top["Shared Hit Blocks"] + top.get("Shared Read Blocks", 0) < 60, top


def test_only_the_maintenance_pass_and_a_row_alone_commit_without_waiting_for_the_disk(
    conn: psycopg.Connection[Any],
) -> None:
    """decision 0040: `synchronous_commit` is off for the pass (its rescue is
    redone by the next) and for a run's row completed on its own; never in
    an exchange that claims or records an outcome."""
    from tests.exchanges import sent
    from tick.engine.api import Engine, RunSpec, maintenance_for
    from tick.history import TickStart

    engine = Engine(lambda: conn, registry=registry_with(noop=lambda ctx, payload: None),
                    maintenance=maintenance_for(86400.0))

    def run_one() -> None:
        import threading
        import time

        spec = RunSpec(history=TickStart("tick", "w-q"), deadline=time.monotonic() + 30,
                       concurrency=2)
        engine.run(spec, threading.Event())

    run_one()  # the first pass may prune
    empty = sent(conn, run_one)
    assert len(empty) == 2 and all("synchronous_commit" in turn for turn in empty)
    enqueue_many(conn, [{"kind": "noop"} for _ in range(6)])
    busy = sent(conn, run_one)
    assert "synchronous_commit" in busy[0] and "Rescue" in busy[0]
    claiming = [turn for turn in busy if "Claim a batch" in turn or "Complete" in turn]
    assert claiming and not any("synchronous_commit" in turn for turn in claiming)
