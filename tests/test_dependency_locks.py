"""SPEC §20: what an enqueue with `after` locks, and for how long. Every
parent is locked until the producer commits, so none becomes final unseen
by its new child; a call refused keeps none of them locked; a parent a tick
completes while the lock waits is found in its finished part, not called
missing; a dedupe hit is neither rewritten nor left unlocked; on an
autocommit connection the call is one transaction."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from tests.support import job_row
from tick import EnqueueError
from tick.producer import enqueue, enqueue_many
from tick.statements import sql

pytestmark = pytest.mark.timeout(60)


def claimed(conn: psycopg.Connection[Any], job_id: int) -> uuid.UUID:
    """What a claim does to the job: RUNNING under a fresh token."""
    token = uuid.uuid4()
    conn.execute("UPDATE awc.jobs SET state = 'RUNNING', attempts = 1, claim_token = %s, "
                 "locked_by = 'w', locked_until = now() + interval '5 min', "
                 "started_at = now() WHERE id = %s", (token, job_id))
    return token


def locked_elsewhere(db_url: str, job_id: int) -> bool:
    """Whether another transaction holds a lock on the job's row."""
    with psycopg.connect(db_url) as other:
        row = other.execute("SELECT id FROM awc.jobs WHERE id = %s FOR UPDATE SKIP LOCKED",
                            (job_id,)).fetchone()
        other.rollback()
    return row is None


def completed_while_producing(conn: psycopg.Connection[Any], db_url: str, parent: int,
                              produce: Callable[[psycopg.Connection[Any]], Any]) -> Any:
    """Run `produce` on a connection of its own while a fenced completion of
    `parent` (which moves its row to a finished part) waits to commit; the
    completion commits once the producer waits on the parent's row. What
    `produce` returned, or the error it raised."""
    token = claimed(conn, parent)
    out: list[Any] = []

    def run() -> None:
        with psycopg.connect(db_url) as producer:
            try:
                out.append(produce(producer))
                producer.commit()
            except (EnqueueError, psycopg.Error) as error:
                out.append(error)

    with psycopg.connect(db_url) as worker:
        worker.execute(sql("complete_jobs"),
                       {"ids": [parent], "tokens": [token], "results": ['{"r": 1}']})
        thread = threading.Thread(target=run)
        thread.start()
        for _ in range(500):
            waiting = conn.execute("SELECT count(*) FROM pg_locks WHERE NOT granted "
                                   "AND locktype = 'transactionid'").fetchone()
            if waiting and waiting[0]:
                break
            thread.join(0.01)
        worker.commit()
        thread.join(20)
    return out[0]


def test_a_refused_enqueue_keeps_none_of_its_parents_locked(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    parent = enqueue(conn, "noop")
    with psycopg.connect(db_url) as producer:
        with pytest.raises(EnqueueError, match="after: names job 999999999, which does not"):
            enqueue(producer, "noop", after=[parent, 999_999_999])
        # The producer's transaction goes on; a tick can still take the parent.
        assert producer.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        assert not locked_elsewhere(db_url, parent)
        producer.rollback()
    assert conn.execute("SELECT count(*) FROM awc.jobs").fetchone() == (1,)


def test_a_parent_completed_while_its_lock_waits_counts_as_done(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    parent = enqueue(conn, "noop")
    got = completed_while_producing(
        conn, db_url, parent, lambda producer: enqueue(producer, "noop", after=[parent]))
    assert isinstance(got, int), got  # before: "after: names job N, which does not exist"
    child = job_row(conn, got)
    assert (child["state"], child["waiting"]) == ("PENDING", 0)
    assert job_row(conn, parent)["state"] == "COMPLETED"


def test_a_dedupe_hit_with_a_policy_leaves_the_existing_job_as_it_was(
        conn: psycopg.Connection[Any]) -> None:
    parent = enqueue(conn, "noop")
    child = enqueue(conn, "noop", after=[parent])
    conn.execute("UPDATE awc.jobs SET dedupe_key = 'K' WHERE id = %s", (child,))
    hit = enqueue(conn, "noop", dedupe_key="K", on_parent_failure="run")
    assert hit == child
    row = job_row(conn, child)
    # Before, the hit rewrote the count to 0: the child ran before its parent.
    assert (row["state"], row["waiting"], row["on_parent_failure"]) == ("PENDING", 1, "cancel")


def test_a_parent_named_by_reference_that_is_a_dedupe_hit_is_locked(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    held = enqueue(conn, "noop", dedupe_key="K")
    enqueue(conn, "noop", after=[held])  # its edges no longer touch its row
    with psycopg.connect(db_url) as producer:
        ids = enqueue_many(producer, [{"kind": "noop", "dedupe_key": "K"},
                                      {"kind": "noop", "after": ["#0"]}])
        assert ids[0] == held
        # Until the producer commits no tick can complete the parent, which
        # would not see the new child and leave it waiting for ever.
        assert locked_elsewhere(db_url, held)
        producer.commit()
    assert job_row(conn, ids[1])["waiting"] == 1


def test_a_parent_named_twice_through_a_dedupe_hit_counts_once(
        conn: psycopg.Connection[Any]) -> None:
    """The producer inserts a child waiting for as many parents as it names
    (tick.parents._marks); a "#N" that is a dedupe hit of a job the child
    also names by id is one parent, and declare_parents.sql, which counts
    the edges, sets the count it got wrong."""
    held = enqueue(conn, "noop", dedupe_key="K")
    ids = enqueue_many(conn, [{"kind": "noop", "dedupe_key": "K"},
                              {"kind": "noop", "after": ["#0", held]}])
    assert ids[0] == held
    row = job_row(conn, ids[1])
    assert (row["waiting"], row["state"]) == (1, "PENDING")
    assert job_row(conn, held)["has_children"] is True


def test_an_enqueue_on_an_autocommit_connection_is_one_transaction(
        conn: psycopg.Connection[Any]) -> None:
    assert conn.autocommit
    parent = enqueue(conn, "noop")
    conn.execute("""
        CREATE TABLE test_writes (what text, xid xid8);
        CREATE FUNCTION test_write() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN INSERT INTO test_writes VALUES (TG_TABLE_NAME, pg_current_xact_id()); RETURN NULL;
        END $$;
        CREATE TRIGGER test_job AFTER INSERT ON awc.jobs FOR EACH ROW EXECUTE FUNCTION test_write();
        CREATE TRIGGER test_edge AFTER INSERT ON awc.job_parents
            FOR EACH ROW EXECUTE FUNCTION test_write();""")
    enqueue(conn, "noop", after=[parent])
    # The child's row and its edge were written by the same transaction:
    # committed alone, the child was ready before its edge existed.
    rows = conn.execute("SELECT array_agg(DISTINCT what ORDER BY what), count(DISTINCT xid) "
                        "FROM test_writes").fetchall()
    assert rows == [(["job_parents", "jobs"], 1)]


@pytest.mark.parametrize("reference", ["#01", "#00", "# 1", "#+1"])
def test_a_reference_is_written_one_way(conn: psycopg.Connection[Any], reference: str) -> None:
    with pytest.raises(EnqueueError, match='job 2: after: holds a string that is not "#N"'):
        enqueue_many(conn, [{"kind": "noop"}, {"kind": "noop"},
                            {"kind": "noop", "after": [reference]}])
    assert conn.execute("SELECT count(*) FROM awc.jobs").fetchone() == (0,)


def test_plain_sql_declares_parents_of_this_transactions_own_jobs_only(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    declare = "SELECT awc.declare_parents(%s, ARRAY[%s]::bigint[])"
    with psycopg.connect(db_url) as producer:
        a, b = (producer.execute("INSERT INTO awc.jobs (kind) VALUES ('noop') RETURNING id")
                .fetchone()[0] for _ in range(2))  # type: ignore[index]
        assert producer.execute(declare, (b, a)).fetchone() == (1,)
        # A cycle within the transaction, and a child inserted in a savepoint.
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="a cycle"):
            producer.execute(declare, (a, b))
        producer.rollback()
        a, b = (producer.execute("INSERT INTO awc.jobs (kind) VALUES ('noop') RETURNING id")
                .fetchone()[0] for _ in range(2))  # type: ignore[index]
        with producer.transaction():
            c = producer.execute("INSERT INTO awc.jobs (kind) VALUES ('noop') RETURNING id"
                                 ).fetchone()[0]  # type: ignore[index]
            assert producer.execute(declare, (c, b)).fetchone() == (1,)
        assert producer.execute(declare, (b, a)).fetchone() == (1,)
        producer.commit()
        # A job committed before: given parents now, A after B would be a cycle
        # (it was accepted, and both waited for ever).
        with pytest.raises(psycopg.errors.InvalidParameterValue,
                           match="was not inserted by this transaction"):
            producer.execute(declare, (a, b))
        producer.rollback()
    rows = conn.execute("SELECT id, waiting FROM awc.jobs ORDER BY id").fetchall()
    assert rows == [(a, 0), (b, 1), (c, 1)]


def test_plain_sql_finds_a_parent_completed_while_its_lock_waits(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    parent = enqueue(conn, "noop")

    def produce(producer: psycopg.Connection[Any]) -> Any:
        child = producer.execute("INSERT INTO awc.jobs (kind) VALUES ('noop') RETURNING id"
                                 ).fetchone()
        assert child is not None
        return producer.execute("SELECT awc.declare_parents(%s, ARRAY[%s]::bigint[])",
                                (child[0], parent)).fetchone()

    # Before: "after names job N, which does not exist".
    assert completed_while_producing(conn, db_url, parent, produce) == (0,)
