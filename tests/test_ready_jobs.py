"""Queue depth for autoscalers (SPEC §25): `awc.ready_jobs(queue, cap)` counts
the jobs a worker could claim now, at most `cap`, from the claim's own ready
index: never a scan of history."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.support import migrated_database
from tick.producer import enqueue

pytestmark = pytest.mark.timeout(300)


def depth(conn: psycopg.Connection[Any], *args: Any) -> int:
    placeholders = ", ".join(["%s"] * len(args))
    (n,) = conn.execute(f"SELECT awc.ready_jobs({placeholders})", args).fetchone()  # type: ignore[misc]
    return int(n)


def test_ready_jobs_counts_only_what_a_worker_could_claim_now(
    conn: psycopg.Connection[Any]
) -> None:
    for _ in range(3):
        enqueue(conn, "noop")
    enqueue(conn, "noop", queue="mail")
    conn.execute("INSERT INTO awc.jobs (kind, run_at) VALUES ('noop', now() + interval '1 hour')")
    conn.execute("INSERT INTO awc.jobs (kind, run_at) VALUES ('noop', '-infinity')")
    conn.execute("INSERT INTO awc.jobs (kind, state, finished_at) VALUES "
                 "('noop', 'COMPLETED', now()), ('noop', 'FAILED', now()), "
                 "('noop', 'CANCELLED', now())")
    conn.execute("INSERT INTO awc.jobs (kind, state, locked_until, claim_token) VALUES "
                 "('noop', 'RUNNING', now() + interval '1 minute', gen_random_uuid())")
    assert depth(conn) == 5  # three + mail + the -infinity one; not future, running, finished
    assert depth(conn, "mail") == 1 and depth(conn, "default") == 4
    assert depth(conn, "nowhere") == 0
    assert depth(conn, None, 2) == 2  # capped
    assert depth(conn, None, 0) == 0 and depth(conn, None, -5) == 0
    assert depth(conn, None, None) == 5  # a NULL cap is the default


def test_a_paused_kind_or_queue_is_not_depth(conn: psycopg.Connection[Any]) -> None:
    for kind, queue in [("a", "q1"), ("a", "q2"), ("b", "q1"), ("b", "q2")]:
        enqueue(conn, kind, queue=queue)
    conn.execute("INSERT INTO awc.limits (scope, name, max_running) VALUES ('kind', 'a', 0)")
    assert depth(conn) == 2
    conn.execute("INSERT INTO awc.limits (scope, name, max_running) VALUES ('queue', 'q1', 0)")
    assert depth(conn) == 1 and depth(conn, "q2") == 1 and depth(conn, "q1") == 0
    # A limit that only bounds (max_running 3) holds nothing back from depth.
    conn.execute("UPDATE awc.limits SET max_running = 3")
    assert depth(conn) == 4


def reads(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    """This transaction's sequential scans of awc.jobs, and index entries read."""
    row = conn.execute(
        "SELECT pg_stat_get_xact_numscans('awc.jobs'::regclass),"
        " (SELECT sum(pg_stat_get_xact_tuples_returned(i.indexrelid)) FROM pg_index AS i"
        "  WHERE i.indrelid = 'awc.jobs'::regclass)").fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


@pytest.fixture(scope="module")
def million(server_url: str, template_db: str) -> Iterator[str]:
    """1,000,000 finished jobs (history), 2,000 ready, 1,000 due later."""
    with migrated_database(server_url, template_db) as url, \
            psycopg.connect(url, autocommit=True) as conn:
        conn.execute("""
            INSERT INTO awc.jobs (kind, queue, state, attempts, finished_at)
            SELECT 'k' || (n % 10), 'q' || (n % 4), 'COMPLETED', 1, now()
            FROM generate_series(1, 1000000) AS n""")
        conn.execute("""
            INSERT INTO awc.jobs (kind, queue, run_at)
            SELECT 'k' || (n % 10), 'q' || (n % 4),
                   CASE WHEN n <= 2000 THEN now() - interval '1 minute'
                        ELSE now() + interval '1 hour' END
            FROM generate_series(1, 3000) AS n""")
        conn.execute("VACUUM ANALYZE awc.jobs")
        yield url


@pytest.mark.slow
@pytest.mark.parametrize("queue", [None, "q1"])
def test_ready_jobs_reads_the_ready_index_not_history_on_a_million_jobs(
    million: str, queue: str | None
) -> None:
    with psycopg.connect(million) as conn:  # one transaction: its own stats, at once
        assert depth(conn, queue, 100) == 100
        seq, idx_read = reads(conn)
        assert seq == 0
        assert 100 <= idx_read <= 100 + 10  # the counted rows, not the rest, not history
        assert depth(conn, queue) == (2000 if queue is None else 500)
        seq, idx_read = reads(conn)
        # Uncapped: the ready rows and the ones due later, never a finished one.
        assert seq == 0 and idx_read <= 110 + 3000 + 10
