"""SPEC §20 (docs/decisions/0033, migration 0022): a completion announces on
`awc_final` only the jobs a producer waits for, so completions nobody waits
for send nothing; a waiter is woken by a real completion, including one
that had already read the job before the waiter marked it."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest

from tests.support import registry_with
from tick import Complete, JobContext, tick
from tick.db import connect
from tick.producer import enqueue
from tick.statements import sql
from tick.waiting import FINAL_CHANNEL, JobOutcome, wait

pytestmark = pytest.mark.timeout(60)


def ok(ctx: JobContext, payload: Any) -> Complete:
    return Complete({"job": ctx.job_id})


def running(conn: psycopg.Connection[Any]) -> tuple[int, str]:
    """A job claimed by a worker that is about to complete it."""
    row = conn.execute(
        "INSERT INTO awc.jobs (kind, state, attempts, claim_token, locked_until, started_at) "
        "VALUES ('ok', 'RUNNING', 1, gen_random_uuid(), now() + interval '1 minute', now()) "
        "RETURNING id, claim_token::text").fetchone()
    assert row is not None
    return int(row[0]), str(row[1])


def heard_until_sentinel(listener: psycopg.Connection[Any], db_url: str) -> list[str]:
    """Every `awc_final` payload delivered before a sentinel sent now:
    notifications arrive in commit order, so none sent earlier is missed."""
    with connect(db_url) as other:
        other.execute(f"NOTIFY {FINAL_CHANNEL}, 'sentinel'")
    heard: list[str] = []
    for note in listener.notifies(timeout=10):
        if note.payload == "sentinel":
            return heard
        heard.append(note.payload)
    raise AssertionError(f"the sentinel never came: {heard}")


def test_a_completion_nobody_waits_for_announces_nothing(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    with connect(db_url) as listener:
        listener.execute(f"LISTEN {FINAL_CHANNEL}")
        job = enqueue(conn, "ok")
        assert tick(conn, registry=registry_with(ok=ok), max_secs=10, max_jobs=1).claimed == 1
        assert conn.execute("SELECT state FROM awc.jobs WHERE id = %s",
                            (job,)).fetchone() == ("COMPLETED",)
        assert heard_until_sentinel(listener, db_url) == []


def test_wait_wakes_on_a_completion_statement(conn: psycopg.Connection[Any],
                                              db_url: str) -> None:
    job = enqueue(conn, "ok")
    got: list[JobOutcome] = []

    def waiter() -> None:
        with connect(db_url) as own:
            # The poll fallback is an hour: only the notification answers in time.
            got.append(wait(own, job, 30, poll_secs=3600))

    thread = threading.Thread(target=waiter)
    thread.start()
    marked = False
    for _ in range(1000):  # the waiter has marked the job: its completion must tell
        row = conn.execute("SELECT waited FROM awc.jobs WHERE id = %s", (job,)).fetchone()
        if row == (True,):
            marked = True
            break
        thread.join(0.01)
    assert marked
    start = time.monotonic()
    assert tick(conn, registry=registry_with(ok=ok), max_secs=10, max_jobs=1).claimed == 1
    thread.join(20)
    assert got == [JobOutcome("COMPLETED", {"job": job}, None)]
    assert time.monotonic() - start < 10


def test_a_mark_committed_while_the_completion_waits_for_the_row_is_announced(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    """The completion's statement began before the mark committed, and waited
    for the marker's lock on the row: it reads the row again and sees it
    marked (the waiter, having read the job still RUNNING, hears of it)."""
    job, token = running(conn)
    with connect(db_url) as listener, connect(db_url) as marker, \
            connect(db_url) as worker:
        listener.execute(f"LISTEN {FINAL_CHANNEL}")
        marker.autocommit = False
        marker.execute(sql("mark_waited"), {"id": job})  # holds the row until it commits
        done: list[Any] = []
        thread = threading.Thread(target=lambda: done.append(worker.execute(
            sql("complete_jobs"), {"ids": [job], "tokens": [token], "results": [None]}
        ).fetchall()))
        thread.start()
        blocked = False
        for _ in range(1000):  # the completion is waiting for the marker's lock
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND wait_event_type = "
                "'Lock'", (worker.info.backend_pid,)).fetchone()
            if row == (1,):
                blocked = True
                break
            thread.join(0.01)
        assert blocked
        marker.commit()
        thread.join(20)
        assert done == [[(job, "COMPLETED")]]
        assert heard_until_sentinel(listener, db_url) == [str(job)]


def test_a_mark_after_the_completion_finds_nothing_and_the_read_sees_it(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    job, token = running(conn)
    assert conn.execute(sql("complete_jobs"), {"ids": [job], "tokens": [token],
                                               "results": [None]}).fetchall() == [
        (job, "COMPLETED")]
    assert conn.execute(sql("mark_waited"), {"id": job}).rowcount == 0
    assert wait(conn, job, 1, poll_secs=3600) == JobOutcome("COMPLETED", None, None)


def test_a_wait_keeps_the_callers_own_listen_and_notifications(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    """`wait` on a connection the caller LISTENs on: the notifications of the
    caller's channel that came before and during the wait were read and
    dropped, and a caller's own LISTEN on awc_final was ended."""
    job = enqueue(conn, "ok")
    with connect(db_url) as own:
        own.execute("LISTEN orders")
        own.execute(f"LISTEN {FINAL_CHANNEL}")
        conn.execute("NOTIFY orders, 'before'")

        def complete_soon() -> None:
            conn.execute("NOTIFY orders, 'during'")
            tick(conn, registry=registry_with(ok=ok), max_secs=10, max_jobs=1)

        threading.Timer(0.3, complete_soon).start()
        assert wait(own, job, 20, poll_secs=3600).state == "COMPLETED"
        listening = own.execute("SELECT array_agg(c ORDER BY c) FROM pg_listening_channels() "
                                "AS c").fetchone()
        assert listening == ([FINAL_CHANNEL, "orders"],)
        payloads = [n.payload for n in own.notifies(timeout=0.5)
                    if n.channel == "orders"]
        assert payloads == ["before", "during"]


def test_a_wait_inside_a_repeatable_read_transaction_is_refused(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    """Its snapshot never changes: the poll read the job as it was, and the
    wait timed out on a job long COMPLETED."""
    job = enqueue(conn, "ok")
    with connect(db_url) as own:
        own.autocommit = False
        own.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        with pytest.raises(ValueError, match="REPEATABLE READ transaction"):
            wait(own, job, 5)
        own.rollback()
        own.isolation_level = psycopg.IsolationLevel.READ_COMMITTED
        tick(conn, registry=registry_with(ok=ok), max_secs=10, max_jobs=1)
        assert wait(own, job, 5).state == "COMPLETED"  # a READ COMMITTED one polls
        own.rollback()


def test_a_completed_outcome_carries_no_earlier_error(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    """A job that failed, was retried by an operator and then completed kept
    its old `last_error`, and `wait` returned it beside a COMPLETED state."""
    from tick.admin import retry

    job = enqueue(conn, "ok")
    conn.execute("UPDATE awc.jobs SET state = 'FAILED', last_error = 'Fail: nope', "
                 "finished_at = now() WHERE id = %s", (job,))
    assert wait(conn, job, 5).last_error == "Fail: nope"
    retry(conn, job)
    tick(conn, registry=registry_with(ok=ok), max_secs=10, max_jobs=1)
    assert wait(conn, job, 5) == JobOutcome("COMPLETED", {"job": job}, None)


def test_a_wait_calls_the_callers_notify_handlers_once(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    """psycopg calls a connection's notify handlers as it reads each
    notification; the wait handed them the same ones again."""
    job = enqueue(conn, "ok")
    got: list[tuple[str, str]] = []
    with connect(db_url) as own:
        own.execute("LISTEN other")
        own.add_notify_handler(lambda n: got.append((n.channel, n.payload)))
        threading.Timer(0.2, lambda: conn.execute("NOTIFY other, 'a'")).start()
        with pytest.warns(RuntimeWarning), pytest.raises(TimeoutError):
            wait(own, job, 3.0, poll_secs=3600)  # the NOTIFY at 0.2 s, well within
    assert got == [("other", "a")]


def test_a_wait_inside_a_read_uncommitted_transaction_polls(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    """PostgreSQL runs READ UNCOMMITTED as READ COMMITTED: each poll sees."""
    job = enqueue(conn, "ok")
    tick(conn, registry=registry_with(ok=ok), max_secs=10, max_jobs=1)
    with connect(db_url) as own:
        own.autocommit = False
        own.isolation_level = psycopg.IsolationLevel.READ_UNCOMMITTED
        assert wait(own, job, 5).state == "COMPLETED"
        own.rollback()
