"""SPEC §24 (docs/decisions/0027): a claimer walks the ready index from its
cursor, and no job that becomes ready behind it is ever left there.

Each test drives the real claim statement through `tick.queue.round_trip`
and the claimer's `Cursor`, as the engine does, against PostgreSQL, and puts
a job behind the cursor in one of the ways that can happen: a transaction
that enqueued before the cursor passed and commits after, another claimer
that locked a job and rolled back, a job due later at a higher priority, an
update back to PENDING, a claim limited to some queues. Then it asserts the
next claims take that job.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest

from tests.claiming import buffers, claim, enqueue, pending
from tick.engine.cursor import Cursor
from tick.queue import NO_CURSOR, new_nonce
from tick.statements import sql


def test_the_cursor_moves_past_what_was_claimed(conn: psycopg.Connection[Any]) -> None:
    ids = enqueue(conn, 25)
    cursor = Cursor()
    got = claim(conn, cursor, 10)
    assert got == ids[:10]  # claim order: priority, run_at, id
    assert cursor.after[2] == ids[10] - 1  # just before the first job left ready
    assert claim(conn, cursor, 10) == ids[10:20]
    assert claim(conn, cursor, 10) == ids[20:]
    assert claim(conn, cursor, 10) == [] and pending(conn) == set()


def test_a_job_enqueued_before_the_cursor_passed_and_committed_after_is_claimed(
    conn: psycopg.Connection[Any], db_url: str
) -> None:
    with psycopg.connect(db_url) as late:  # a transaction: its now() is its start
        (early,) = enqueue(late, 1)  # run_at = the start of `late`
        ids = enqueue(conn, 20)  # committed at once, ready later than `early`
        cursor = Cursor()
        assert claim(conn, cursor, 10) == ids[:10]
        assert claim(conn, cursor, 5) == ids[10:15]  # the probe saw `late` running
        late.commit()
    # `early` sorts before the cursor; the transaction the last claim saw
    # running has ended, so its job is found by its ready_xid.
    got = claim(conn, cursor, 10)
    assert got[0] == early and got[1:] == ids[15:]
    assert pending(conn) == set()


def test_a_transaction_begun_after_the_last_claim_is_found_too(
    conn: psycopg.Connection[Any], db_url: str
) -> None:
    ids = enqueue(conn, 20)
    cursor = Cursor()
    assert claim(conn, cursor, 10) == ids[:10]
    # A job whose run_at puts it far behind the cursor, made ready by a
    # transaction that began after that claim's snapshot.
    (behind,) = enqueue(conn, 1, run_at="2000-01-01T00:00:00Z")
    got = claim(conn, cursor, 5)
    assert got == [behind, *ids[10:14]]
    assert claim(conn, cursor, 10) == ids[14:]


def test_an_update_back_to_pending_behind_the_cursor_is_claimed(
    conn: psycopg.Connection[Any]
) -> None:
    ids = enqueue(conn, 20)
    cursor = Cursor()
    assert claim(conn, cursor, 10) == ids[:10]
    # An operator (or a rescue) puts a claimed job back, with its old run_at.
    conn.execute("UPDATE awc.jobs SET state = 'PENDING', claim_token = NULL, "
                 "locked_by = NULL, locked_until = NULL WHERE id = %s", (ids[0],))
    assert claim(conn, cursor, 3) == [ids[0], ids[10], ids[11]]


def test_a_job_another_claimer_locked_and_released_is_not_passed_by(
    conn: psycopg.Connection[Any], db_url: str
) -> None:
    ids = enqueue(conn, 30)
    with psycopg.connect(db_url) as other:  # another claimer, mid-claim: its locks held
        params = {**NO_CURSOR, "nonce": new_nonce(), "slots": [f"o{i}" for i in range(5)],
                  "lease": 60.0,
                  "cap": 60.0, "leases": "{}", "kinds": None, "queues": None, "queue": None}
        took = [r[0] for r in other.execute(sql("claim_jobs"), params) if r[0] is not None]
        assert took == ids[:5]
        cursor = Cursor()
        assert claim(conn, cursor, 10) == ids[5:15]  # SKIP LOCKED passed them
        other.rollback()  # a claimer that crashed mid-claim: its jobs are ready again
    # ... and this claimer's cursor never passed them.
    assert claim(conn, cursor, 10) == [*ids[:5], *ids[15:20]]
    assert claim(conn, cursor, 20) == ids[20:]


def test_a_job_due_later_at_a_higher_priority_is_claimed_once_due(
    conn: psycopg.Connection[Any]
) -> None:
    row = conn.execute("INSERT INTO awc.jobs (kind, priority, run_at) VALUES "
                       "('noop', 5, now() + interval '1.5 seconds') RETURNING id").fetchone()
    assert row is not None
    soon = row[0]
    ids = enqueue(conn, 40)
    cursor = Cursor()
    taken = claim(conn, cursor, 10)
    assert taken == ids[:10]  # passed over: not due yet, and first in claim order
    assert cursor.rewind is not None and cursor.rewind[2] == soon - 1
    deadline = time.monotonic() + 10
    while soon not in taken:
        assert time.monotonic() < deadline, "the job due later was never claimed"
        time.sleep(0.1)
        taken += claim(conn, cursor, 1)
    assert cursor.rewind is None
    assert taken[:-1] == ids[:len(taken) - 1]  # in order until it was due, then it
    taken += claim(conn, cursor, 40)
    assert sorted(taken) == sorted([soon, *ids]) and pending(conn) == set()


def test_a_claim_that_fails_leaves_the_cursor_where_it_was(
    conn: psycopg.Connection[Any]
) -> None:
    ids = enqueue(conn, 10)
    cursor = Cursor()
    assert claim(conn, cursor, 4) == ids[:4]
    before = (cursor.after, cursor.xmax, list(cursor.xip))
    conn.execute("CREATE FUNCTION pg_temp.refuse() RETURNS trigger LANGUAGE plpgsql AS "
                 "$$ BEGIN RAISE EXCEPTION 'refused'; END $$")
    conn.execute("CREATE TRIGGER refuse BEFORE UPDATE ON awc.jobs FOR EACH ROW "
                 "EXECUTE FUNCTION pg_temp.refuse()")
    with pytest.raises(psycopg.Error):
        claim(conn, cursor, 4)
    assert (cursor.after, cursor.xmax, list(cursor.xip)) == before
    conn.execute("DROP TRIGGER refuse ON awc.jobs")
    assert claim(conn, cursor, 10) == ids[4:]


def test_one_queue_keeps_its_own_cursor(conn: psycopg.Connection[Any]) -> None:
    mail = enqueue(conn, 10, queue="mail")
    other = enqueue(conn, 10, queue="other")
    cursor = Cursor()
    assert claim(conn, cursor, 4, ["mail"]) == mail[:4]
    (late,) = enqueue(conn, 1, queue="mail", run_at="2000-01-01T00:00:00Z")
    (not_mine,) = enqueue(conn, 1, queue="other", run_at="2000-01-01T00:00:00Z")
    assert claim(conn, cursor, 3, ["mail"]) == [late, *mail[4:6]]
    assert claim(conn, cursor, 10, ["mail"]) == mail[6:]
    # A claimer of several queues walks the whole ready index with a filter.
    several = Cursor()
    assert claim(conn, several, 30, ["mail", "other"]) == [not_mine, *other]
    assert pending(conn) == set()


def test_ticks_drain_every_job_once_while_the_horizon_is_pinned_and_a_producer_commits_late(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], db_url: str
) -> None:
    """SPEC §12 and §24: three `awc tick` processes drain under a pinned
    horizon while a producer's transaction, begun before them, commits in the
    middle of the drain: its jobs sort behind every cursor, and the same
    processes claim them, each job once."""
    from tests.support import spawn, wait_for
    from tick.producer import enqueue_many

    with psycopg.connect(db_url) as pin, psycopg.connect(db_url) as late:
        pin.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        pin.execute("SELECT count(*) FROM awc.jobs")  # holds the horizon from here
        late_ids = enqueue_many(late, [{"kind": "ledger"} for _ in range(50)])
        ids = enqueue_many(conn, [{"kind": "ledger"} for _ in range(3000)])
        env = {**awc_env, "AWC_TICK_MAX_JOBS": "10000", "AWC_WORKER_CONCURRENCY": "4"}
        procs = [spawn({**env, "AWC_WORKER_ID": f"pinned{n}"}, "tick", "--json")
                 for n in range(3)]
        wait_for(lambda: conn.execute("SELECT count(*) FROM awc.jobs WHERE state = "
                                      "'COMPLETED'").fetchone()[0] >= 300,  # type: ignore[index]
                 timeout=60)
        late.commit()
        for proc in procs:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err[-2000:]
        held = pin.execute("SELECT count(*) FROM awc.jobs").fetchone()
        assert held is not None and held[0] == 0  # the pin's snapshot still holds
    states = conn.execute("SELECT state, attempts, count(*) FROM awc.jobs GROUP BY 1, 2").fetchall()
    assert states == [("COMPLETED", 1, 3050)]
    ran = conn.execute("SELECT job_id, attempt FROM test_ledger ORDER BY 1").fetchall()
    assert ran == [(i, 1) for i in sorted([*ids, *late_ids])]


@pytest.mark.slow
def test_a_claim_from_its_cursor_costs_the_same_however_many_jobs_the_pin_kept(
    conn: psycopg.Connection[Any], db_url: str
) -> None:
    """SPEC §24: under a pinned horizon, the buffers a claim touches do not
    grow with the jobs claimed since the pin: the claim after 20,000 jobs
    costs what the claim after 200 did, where a claim from the ready index's
    start visits every job claimed since the pin."""
    with psycopg.connect(db_url) as pin:
        pin.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        pin.execute("SELECT 1 FROM awc.jobs LIMIT 1")
        enqueue(conn, 21_000)
        cursor = Cursor()
        cost: dict[int, int] = {}
        done = 0
        while done < 20_000:
            if done in (200, 20_000 - 200):
                cost[done] = buffers(conn, cursor, 200)
            done += len(claim(conn, cursor, 200))
        from_start = buffers(conn, Cursor(), 200)
    # A walk from the start visits the 19,800 claimed jobs' entries and heap
    # pages (the page a run of them shares, once); from the cursor, none.
    walked = from_start - cost[200]
    assert walked >= 500, (from_start, cost)
    assert cost[19_800] - cost[200] <= walked / 4, (from_start, cost)
