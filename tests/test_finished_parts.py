"""SPEC §24, §4.3, §7.3: completed jobs leave the hot table for finished
parts that retention truncates whole (docs/decisions/0030), and every job is
still read through `awc.jobs`."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from tests.support import at_version, registry_with
from tick import tick
from tick.db import connect
from tick.maintenance import prune
from tick.migrate import migrate
from tick.parts import PARTS
from tick.producer import enqueue

# Columns a completion rewrites; every other one is carried over as it was.
REWRITTEN = {"state", "locked_by", "locked_until", "claim_token", "result", "updated_at",
             "finished_at"}
DAY = 86400


def current_part(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT slot FROM awc.done_parts WHERE current").fetchone()
    assert row is not None
    return int(row[0])


def part_of(conn: psycopg.Connection[Any], job_id: int) -> str:
    row = conn.execute("SELECT tableoid::regclass::text FROM awc.jobs WHERE id = %s",
                       (job_id,)).fetchone()
    assert row is not None, job_id
    return str(row[0])


def run_all(conn: psycopg.Connection[Any], **handlers: Any) -> None:
    tick(conn, registry=registry_with(**handlers), max_secs=30, max_jobs=1000)


def test_a_completed_job_moves_to_the_current_part_with_every_column_kept(
    conn: psycopg.Connection[Any]
) -> None:
    """Every column of awc.jobs survives the move, whatever columns the table
    gains: the comparison reads them from the catalog."""
    job = enqueue(conn, "work", {"n": 1, "text": "\u00e9"}, max_attempts=3,
                  dedupe_key="one", priority=4, queue="q")

    def work(ctx: Any, payload: Any) -> dict[str, int]:
        ctx.checkpoint({"step": 2}, progress=0.5)
        return {"done": payload["n"]}

    conn.execute("UPDATE awc.jobs SET errors = '[{\"error\": \"earlier\"}]' WHERE id = %s", (job,))
    columns = [r[0] for r in conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = 'awc.jobs'::regclass "
        "AND attnum > 0 AND NOT attisdropped ORDER BY attnum")]
    run_all(conn, work=work)
    row = conn.execute("SELECT to_jsonb(j) FROM awc.jobs AS j WHERE id = %s", (job,)).fetchone()
    assert row is not None
    done = row[0]
    assert part_of(conn, job) == f"awc.jobs_done_{current_part(conn)}"
    assert conn.execute("SELECT count(*) FROM ONLY awc.jobs WHERE id = %s",
                        (job,)).fetchone() == (0,)
    assert set(done) == set(columns)
    assert done["state"] == "COMPLETED" and done["result"] == {"done": 1}
    # The claim's token stays: a completion sent again after a lost answer
    # is known by it as the holder's own (tick/sql/lost_claims.sql).
    assert done["claim_token"] is not None and done["locked_by"] is None
    assert done["finished_at"] is not None
    kept = {c: done[c] for c in columns if c not in REWRITTEN}
    assert kept["payload"] == {"n": 1, "text": "\u00e9"} and kept["dedupe_key"] == "one"
    assert (kept["priority"], kept["queue"], kept["max_attempts"]) == (4, "q", 3)
    assert kept["checkpoint"] == {"step": 2} and kept["progress"] == 0.5
    assert kept["errors"] == [{"error": "earlier"}] and kept["attempts"] == 1
    assert kept["started_at"] is not None


def test_the_completion_names_every_column_of_the_table_in_order(
    conn: psycopg.Connection[Any]
) -> None:
    """A column added to awc.jobs must be added to the completion's row too:
    the ROW it builds has exactly the table's columns (a missing one would
    fail every completion; a swapped pair of one type would go unseen)."""
    from tick.statements import sql

    text = sql("complete_jobs")
    built = text[text.index("SELECT ROW(") + len("SELECT ROW("):text.index(")::awc.jobs")]
    fields = [f.strip() for f in built.replace("\n", " ").split(",")]
    columns = [r[0] for r in conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = 'awc.jobs'::regclass "
        "AND attnum > 0 AND NOT attisdropped ORDER BY attnum")]
    # The result's expression holds two commas of its own.
    fields = [*fields[:12], ", ".join(fields[12:14]), *fields[14:]]
    assert len(fields) == len(columns), (fields, columns)
    for field, column in zip(fields, columns, strict=True):
        if field.startswith("d."):
            assert field == f"d.{column}", (field, column)
        else:
            assert column in REWRITTEN, (field, column)


def test_retention_truncates_the_oldest_part_and_keeps_the_rest(
    conn: psycopg.Connection[Any]
) -> None:
    old = enqueue(conn, "noop")
    run_all(conn, noop=lambda ctx, p: None)
    first = current_part(conn)
    # The part has been current for more than a seventh of a 7-day retention,
    # and the part after the next one last began longer ago than that.
    conn.execute("UPDATE awc.done_parts SET began = now() - interval '2 days' WHERE current")
    assert prune(conn, 7 * DAY, force=True) == 0  # the next part is empty: rotated, nothing gone
    second = current_part(conn)
    assert second == (first + 1) % PARTS
    new = enqueue(conn, "noop")
    run_all(conn, noop=lambda ctx, p: None)
    assert part_of(conn, old) == f"awc.jobs_done_{first}"
    assert part_of(conn, new) == f"awc.jobs_done_{second}"

    # Later: `first` is next again, the part before it current for two
    # days, and the part after it (`second`) began eight days ago, so every
    # row of `first` is older than the seven-day retention.
    conn.execute("UPDATE awc.done_parts SET current = false WHERE current")
    conn.execute("UPDATE awc.done_parts SET current = true, began = now() - interval '2 days' "
                 "WHERE slot = %s", ((first - 1) % PARTS,))
    conn.execute("UPDATE awc.done_parts SET began = now() - interval '8 days' WHERE slot = %s",
                 (second,))
    assert prune(conn, 7 * DAY, force=True) == 1  # `first` held one completed job
    assert current_part(conn) == first
    assert conn.execute("SELECT count(*) FROM awc.jobs WHERE id = %s", (old,)).fetchone() == (0,)
    assert part_of(conn, new) == f"awc.jobs_done_{second}"  # within the retention: kept
    assert conn.execute(f"SELECT pg_relation_size('awc.jobs_done_{first}')").fetchone() == (0,)


def test_a_part_not_yet_past_retention_is_never_emptied(conn: psycopg.Connection[Any]) -> None:
    job = enqueue(conn, "noop")
    run_all(conn, noop=lambda ctx, p: None)
    slot = current_part(conn)
    # Current for two days of a seven-day retention, but the part after the
    # next began only three days ago: the next part's rows may be that young.
    conn.execute("UPDATE awc.done_parts SET began = now() - interval '2 days' WHERE current")
    conn.execute("UPDATE awc.done_parts SET began = now() - interval '3 days' WHERE slot = %s",
                 ((slot + 2) % PARTS,))
    assert prune(conn, 7 * DAY, force=True) == 0
    assert current_part(conn) == slot
    assert part_of(conn, job) == f"awc.jobs_done_{slot}"


def test_a_busy_part_is_left_for_the_next_pass_and_completions_keep_flowing(
    db_url: str, conn: psycopg.Connection[Any]
) -> None:
    """A reader holding the next part (a pg_dump, a report) makes the
    TRUNCATE give up after its lock wait instead of queueing every
    completion behind it."""
    slot = current_part(conn)
    conn.execute("UPDATE awc.done_parts SET began = now() - interval '2 days' WHERE current")
    with connect(db_url) as reader:
        reader.execute("BEGIN")
        reader.execute(f"SELECT count(*) FROM awc.jobs_done_{(slot + 1) % PARTS}")
        done = threading.Event()
        pruned: list[int] = []

        def prune_now() -> None:
            with connect(db_url) as own:
                pruned.append(prune(own, 7 * DAY, force=True))
            done.set()

        worker = threading.Thread(target=prune_now)
        worker.start()
        assert done.wait(20), "the prune queued behind the reader"
        worker.join(5)
        job = enqueue(conn, "noop")
        run_all(conn, noop=lambda ctx, p: None)
        assert part_of(conn, job) == f"awc.jobs_done_{slot}"
        reader.execute("ROLLBACK")
    assert pruned == [0] and current_part(conn) == slot
    assert prune(conn, 7 * DAY, force=True) == 0  # free now: rotated
    assert current_part(conn) == (slot + 1) % PARTS


def test_the_sql_interface_reads_and_discards_every_job_whatever_its_part(
    conn: psycopg.Connection[Any]
) -> None:
    from tick.admin import discard

    done = enqueue(conn, "noop")
    failed = enqueue(conn, "boom", max_attempts=1)
    waiting = enqueue(conn, "noop", run_at=datetime.now(UTC) + timedelta(hours=1))
    run_all(conn, noop=lambda ctx, p: None, boom=lambda ctx, p: 1 / 0)
    states = dict(conn.execute("SELECT id, state FROM awc.jobs WHERE id = ANY(%s)",
                               ([done, failed, waiting],)).fetchall())
    assert states == {done: "COMPLETED", failed: "FAILED", waiting: "PENDING"}
    counted = conn.execute("SELECT count(*) FROM awc.jobs WHERE state = 'COMPLETED'").fetchone()
    assert counted == (1,)
    discard(conn, done)
    assert conn.execute("SELECT count(*) FROM awc.jobs WHERE id = %s", (done,)).fetchone() == (0,)


def test_migrate_keeps_completed_jobs_in_the_hot_table_and_prune_still_takes_them(
    empty_db_url: str,
) -> None:
    with connect(empty_db_url) as conn:
        at_version(conn, 12)
        old, recent = (r[0] for r in conn.execute("""
            INSERT INTO awc.jobs (kind, state, attempts, finished_at)
            VALUES ('noop', 'COMPLETED', 1, now() - interval '30 days'),
                   ('noop', 'COMPLETED', 1, now())
            RETURNING id""").fetchall())
        migrate(conn)
        assert part_of(conn, old) == part_of(conn, recent) == "awc.jobs"
        assert prune(conn, 7 * DAY, force=True) == 1
        assert conn.execute("SELECT id FROM awc.jobs").fetchall() == [(recent,)]


def test_retention_carries_a_parent_a_waiting_child_needs_and_drops_finished_edges(
    conn: psycopg.Connection[Any]
) -> None:
    """SPEC §20 with §24: emptying a part keeps the completed parent a child
    not yet final still reads, without settling that child a second time;
    a completed child's edges go with it."""
    done_parent = enqueue(conn, "noop")
    slow_parent = enqueue(conn, "noop", run_at=datetime.now(UTC) + timedelta(days=30))
    child = enqueue(conn, "noop", after=[done_parent, slow_parent])
    gone_parent = enqueue(conn, "noop")
    gone_child = enqueue(conn, "noop", after=[gone_parent])
    run_all(conn, noop=lambda ctx, p: None)
    first = current_part(conn)
    assert part_of(conn, done_parent) == part_of(conn, gone_child) == f"awc.jobs_done_{first}"
    assert conn.execute("SELECT waiting FROM awc.jobs WHERE id = %s", (child,)).fetchone() == (1,)
    # `first` is next to be emptied, and everything in it is past retention.
    conn.execute("UPDATE awc.done_parts SET current = false WHERE current")
    conn.execute("UPDATE awc.done_parts SET current = true, began = now() - interval '2 days' "
                 "WHERE slot = %s", ((first - 1) % PARTS,))
    conn.execute("UPDATE awc.done_parts SET began = now() - interval '8 days' WHERE slot = %s",
                 ((first + 1) % PARTS,))
    assert prune(conn, 7 * DAY, force=True) == 2  # gone_parent and gone_child; one carried
    assert part_of(conn, done_parent) == f"awc.jobs_done_{(first - 1) % PARTS}"
    assert conn.execute("SELECT waiting FROM awc.jobs WHERE id = %s", (child,)).fetchone() == (1,)
    edges = conn.execute("SELECT child_id, parent_id FROM awc.job_parents ORDER BY 1, 2").fetchall()
    assert edges == sorted([(child, done_parent), (child, slow_parent)])


def test_retention_keeps_a_parent_a_child_committing_during_the_rotation_needs(
    db_url: str, conn: psycopg.Connection[Any]
) -> None:
    """SPEC §20 with §24: a producer's transaction names a completed parent
    in the part being emptied and commits while the rotation waits for it.
    The carry had been read before that commit: the TRUNCATE took the parent,
    and the child ran without it."""
    from tests.support import seen_waiting_on_a_lock

    done_parent = enqueue(conn, "noop")
    slow_parent = enqueue(conn, "noop", run_at=datetime.now(UTC) + timedelta(days=30))
    run_all(conn, noop=lambda ctx, p: None)
    first = current_part(conn)
    conn.execute("UPDATE awc.done_parts SET current = false WHERE current")
    conn.execute("UPDATE awc.done_parts SET current = true, began = now() - interval '2 days' "
                 "WHERE slot = %s", ((first - 1) % PARTS,))
    conn.execute("UPDATE awc.done_parts SET began = now() - interval '8 days' WHERE slot = %s",
                 ((first + 1) % PARTS,))
    with connect(db_url) as producer, connect(db_url) as own:
        rotator = own.info.backend_pid
        with producer.transaction():
            child = enqueue(producer, "noop", after=[done_parent, slow_parent])
            worker = threading.Thread(target=lambda: prune(own, 7 * DAY, force=True))
            worker.start()
            # The rotation waits for the producer's lock (or gives up after
            # its lock timeout, then the part is left for the next pass).
            seen_waiting_on_a_lock(conn, rotator)
        worker.join(20)
        assert not worker.is_alive()
    assert conn.execute("SELECT state FROM awc.jobs WHERE id = %s", (done_parent,)).fetchone() \
        == ("COMPLETED",)
    assert conn.execute("SELECT waiting FROM awc.jobs WHERE id = %s", (child,)).fetchone() == (1,)


def test_a_completion_leaves_a_walk_journal_to_the_prune_and_a_live_one_stays(
    conn: psycopg.Connection[Any]
) -> None:
    """SPEC §17 (migration 0024): the journal has no foreign key, so a
    completion cascades nothing; the journal of a job that completed without
    its walk's verdict deleting it is swept by the prune, a live job's kept."""
    done_id = enqueue(conn, "noop", {})
    live_id = enqueue(conn, "noop", {}, run_at=datetime.now(UTC) + timedelta(days=1))
    for job_id in (done_id, live_id):
        conn.execute("INSERT INTO awc.walk_marks (job_id, digest, type, status) "
                     "SELECT %s, 'd' || n, 'blob', 'seen' FROM generate_series(1, 3) AS n",
                     (job_id,))
    run_all(conn, noop=lambda ctx, payload: None)
    assert part_of(conn, done_id).startswith("awc.jobs_done_")
    marks = "SELECT job_id, count(*) FROM awc.walk_marks GROUP BY 1 ORDER BY 1"
    assert conn.execute(marks).fetchall() == [(done_id, 3), (live_id, 3)]
    prune(conn, 7 * DAY, force=True)
    assert conn.execute(marks).fetchall() == [(live_id, 3)]
