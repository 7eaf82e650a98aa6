"""SPEC §24 (docs/decisions/0027): a new process's first claim starts where
the last run's claimer left off, not at the ready index's start, and that
passes no job by.

A run that claimed without a filter leaves its claimer's whole cursor (mark,
snapshot, rewind) on its history row; the next process reads the newest in
its maintenance pass's first exchange (`claim_seed.sql`). The tests leave a
cursor as the engine's history statements do, put jobs behind it in the ways
a cursor can be passed (a late commit, a job made ready again, a job due
later at a higher priority), and assert a cursor seeded from it takes them;
then they check what the seed is for (a first claim under a pinned horizon
costs what a continuing one does) and what keeps it from being read (a
filter, too many jobs since, a snapshot ahead of the server's).
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest

from tests.claiming import buffers, claim, enqueue, pending
from tick.engine.cursor import Cursor
from tick.history import NO_SEED, TickStart, counts
from tick.maintenance import SEED_MOST_JOBS
from tick.statements import sql


def leave(conn: psycopg.Connection[Any], cursor: Cursor | None) -> None:
    """Write a history row as a loop's stretch ends, leaving `cursor`."""
    left = NO_SEED if cursor is None else cursor.left(time.monotonic())
    conn.execute(sql("record_tick"), {**TickStart("loop", "w1").params(), "ran_secs": 1.0,
                                      "error": None, "slots": [], **counts(None), **left})


def seeded(conn: psycopg.Connection[Any], most: int = SEED_MOST_JOBS) -> Cursor:
    """A new process's cursor, seeded as its first maintenance pass does."""
    cursor = Cursor()
    cursor.seed(conn.execute(sql("claim_seed"), {"most": most}).fetchone(), time.monotonic())
    return cursor


def test_a_new_cursor_starts_where_the_last_run_left_off(
    conn: psycopg.Connection[Any]
) -> None:
    ids = enqueue(conn, 30)
    first = Cursor()
    assert claim(conn, first, 10) == ids[:10]
    leave(conn, first)
    second = seeded(conn)
    assert (second.after, second.xmax, second.xip) == (first.after, first.xmax, first.xip)
    assert claim(conn, second, 10) == ids[10:20]
    leave(conn, second)
    assert claim(conn, seeded(conn), 20) == ids[20:] and pending(conn) == set()


def test_jobs_made_ready_behind_a_left_cursor_are_claimed_by_the_next_process(
    conn: psycopg.Connection[Any], db_url: str
) -> None:
    with psycopg.connect(db_url) as late:  # a transaction: its now() is its start
        (early,) = enqueue(late, 1)  # sorts before every job below
        ids = enqueue(conn, 20)
        first = Cursor()
        assert claim(conn, first, 10) == ids[:10]
        leave(conn, first)  # its snapshot saw `late` running
        late.commit()
    # A claimed job an operator (or a rescue) puts back, with its old run_at,
    # and one enqueued behind the cursor after the row was left.
    conn.execute("UPDATE awc.jobs SET state = 'PENDING', claim_token = NULL, "
                 "locked_by = NULL, locked_until = NULL WHERE id = %s", (ids[0],))
    (behind,) = enqueue(conn, 1, run_at="2000-01-01T00:00:00Z")
    got = claim(conn, seeded(conn), 5)
    assert sorted(got[:3]) == sorted([early, ids[0], behind]) and got[3:] == ids[10:12]


def test_a_job_due_later_that_a_run_passed_over_is_claimed_once_due_by_the_next(
    conn: psycopg.Connection[Any]
) -> None:
    row = conn.execute("INSERT INTO awc.jobs (kind, priority, run_at) VALUES "
                       "('noop', 5, now() + interval '1.5 seconds') RETURNING id").fetchone()
    assert row is not None
    soon = row[0]
    ids = enqueue(conn, 40)
    first = Cursor()
    assert claim(conn, first, 10) == ids[:10]
    assert first.rewind is not None
    # The next claim is past where the rewind was found: the row must carry
    # the rewind the claimer holds, not only its last claim's.
    assert claim(conn, first, 5) == ids[10:15]
    leave(conn, first)
    second = seeded(conn)
    assert second.rewind == first.rewind
    taken = claim(conn, second, 5)
    assert taken == ids[15:20]
    deadline = time.monotonic() + 10
    while soon not in taken:
        assert time.monotonic() < deadline, "the job due later was never claimed"
        time.sleep(0.1)
        taken += claim(conn, second, 1)
    taken += claim(conn, second, 40)
    assert sorted(taken) == sorted([soon, *ids[15:]]) and pending(conn) == set()


def test_a_run_leaves_no_cursor_before_its_first_claim_and_a_row_keeps_its_last(
    conn: psycopg.Connection[Any]
) -> None:
    leave(conn, Cursor())
    leave(conn, None)
    assert conn.execute(sql("claim_seed"), {"most": SEED_MOST_JOBS}).fetchone() is None
    ids = enqueue(conn, 5)
    first = Cursor()
    claim(conn, first, 2)
    leave(conn, first)
    leave(conn, None)  # a newer row without one: the newest cursor is still read
    assert claim(conn, seeded(conn), 5) == ids[2:]


def test_a_cursor_is_not_taken_when_many_jobs_were_enqueued_since(
    conn: psycopg.Connection[Any]
) -> None:
    enqueue(conn, 10)
    first = Cursor()
    claim(conn, first, 5)
    leave(conn, first)
    enqueue(conn, 50)
    assert seeded(conn, most=49).xmax is None  # a probe from it would read 50: walk instead
    assert seeded(conn, most=50).xmax == first.xmax


def test_a_cursor_ahead_of_the_server_is_not_taken(conn: psycopg.Connection[Any]) -> None:
    """A database restored from a dump starts its transaction ids again: a
    snapshot from before would hide every job made ready since."""
    ids = enqueue(conn, 5)
    leave(conn, None)
    conn.execute("UPDATE awc.ticks SET cursor = ROW(0, now(), 0, '99999999999'::xid8, "
                 "'{}', NULL, NULL, NULL, NULL, 0)::awc.claim_seed")
    fresh = seeded(conn)
    assert fresh.xmax is None
    assert claim(conn, fresh, 5) == ids


def test_a_row_cannot_hold_a_cursor_the_claim_would_refuse(
    conn: psycopg.Connection[Any]
) -> None:
    leave(conn, None)
    with pytest.raises(psycopg.errors.DataError):
        conn.execute("UPDATE awc.ticks SET cursor = ROW(0, 'soon', 0, '5', '{}', NULL, NULL, "
                     "NULL, NULL, 0)::awc.claim_seed")


def test_ticks_leave_their_cursor_and_a_filtered_one_leaves_none(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    """Real `awc tick` processes: each leaves its cursor on its row and the
    next starts there; every job runs once (SPEC §12)."""
    from tests.support import run_awc

    ids = enqueue(conn, 60)
    conn.execute("UPDATE awc.jobs SET kind = 'ledger'")
    env = {**awc_env, "AWC_WORKER_CONCURRENCY": "4"}
    for _ in range(2):
        done = run_awc(env, "tick", "--max-jobs", "20", "--json")
        assert done.returncode == 0, done.stderr[-2000:]
    rows = conn.execute("SELECT (cursor).after_id FROM awc.ticks ORDER BY id").fetchall()
    assert [r[0] for r in rows] == [ids[19], ids[39]]
    done = run_awc(env, "tick", "--kind", "ledger", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    last = conn.execute("SELECT cursor IS NULL FROM awc.ticks ORDER BY id DESC LIMIT 1")
    assert last.fetchone() == (True,)
    ran = conn.execute("SELECT job_id, attempt FROM test_ledger ORDER BY 1").fetchall()
    assert ran == [(i, 1) for i in ids]


@pytest.mark.slow
def test_a_first_claim_from_a_left_cursor_costs_what_a_continuing_claim_does(
    conn: psycopg.Connection[Any], db_url: str
) -> None:
    """SPEC §24: under a pinned horizon a new process's first claim, seeded,
    touches about the buffers the claimer that left the cursor would have,
    where one from the ready index's start visits every job claimed since
    the pin."""
    with psycopg.connect(db_url) as pin:
        pin.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        pin.execute("SELECT 1 FROM awc.jobs LIMIT 1")
        enqueue(conn, 21_000)
        first = Cursor()
        done = 0
        while done < 20_000:
            done += len(claim(conn, first, 200))
        leave(conn, first)
        continuing = buffers(conn, first, 200)
        fresh = buffers(conn, seeded(conn), 200)
        from_start = buffers(conn, Cursor(), 200)
    walked = from_start - continuing
    assert walked >= 500, (from_start, continuing)
    assert fresh - continuing <= walked / 4, (from_start, continuing, fresh)
