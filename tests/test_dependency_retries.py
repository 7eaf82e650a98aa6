"""SPEC §20 and §22: an operator's retry of failed or cancelled jobs,
one or many at once, leaves every PENDING job waiting for exactly its
parents that are not final (migration 0026, tick/sql/recount_waiting.sql).

A bulk retry of a chain's cancelled jobs used to count each revived parent
twice (once at the child's row, once in the parent's trigger): the chain
then waited for ever after its head ran. A `run` child made ready by its
parent's failure did not wait for the retried parent again."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from tests.support import registry_with
from tick import Complete, JobContext, Retry, tick
from tick.admin import retry
from tick.bulk import Selection, apply
from tick.producer import enqueue_many

pytestmark = pytest.mark.timeout(120)

# PENDING jobs whose count is not the number of their parents not final.
MISCOUNTED = """SELECT c.id FROM awc.jobs AS c WHERE c.state = 'PENDING' AND c.waiting <> (
    SELECT count(*) FROM awc.job_parents AS e JOIN awc.jobs AS p ON p.id = e.parent_id
    WHERE e.child_id = c.id AND p.state NOT IN ('COMPLETED', 'FAILED', 'CANCELLED'))"""


def ok(ctx: JobContext, payload: Any) -> Complete:
    return Complete({"job": ctx.job_id})


def drain(conn: psycopg.Connection[Any]) -> None:
    for _ in range(200):
        if tick(conn, registry=registry_with(noop=ok), max_secs=30, max_jobs=1000,
                concurrency=4).claimed == 0:
            return
    raise AssertionError("the queue did not drain")


def fail(conn: psycopg.Connection[Any], ids: list[int]) -> None:
    conn.execute("UPDATE awc.jobs SET state = 'FAILED', finished_at = now() "
                 "WHERE id = ANY(%s) AND state = 'PENDING'", (ids,))


def miscounted(conn: psycopg.Connection[Any]) -> list[int]:
    return [row[0] for row in conn.execute(MISCOUNTED).fetchall()]


def test_a_bulk_retry_of_a_chains_cancelled_jobs_lets_the_chain_run_in_order(
        conn: psycopg.Connection[Any]) -> None:
    ids = enqueue_many(conn, [{"kind": "noop"}] + [
        {"kind": "noop", "after": [f"#{n}"]} for n in range(29)])
    fail(conn, ids[:1])
    assert apply(conn, "retry", Selection(state="CANCELLED")) == 29
    assert miscounted(conn) == []  # 28 of them waited for 2 parents, one for none
    retry(conn, ids[0])
    assert miscounted(conn) == []
    drain(conn)
    rows = conn.execute("SELECT id, state, attempts FROM awc.jobs ORDER BY started_at, id"
                        ).fetchall()
    assert rows == [(i, "COMPLETED", 1) for i in ids]  # each once, in the chain's order


def test_a_bulk_retry_of_a_fan_ins_failed_parents_counts_each_once(
        conn: psycopg.Connection[Any]) -> None:
    ids = enqueue_many(conn, [{"kind": "noop"} for _ in range(50)]
                       + [{"kind": "noop", "after": [f"#{n}" for n in range(50)]}])
    parents, child = ids[:-1], ids[-1]
    fail(conn, parents)
    assert conn.execute("SELECT state FROM awc.jobs WHERE id = %s", (child,)).fetchone() == (
        "CANCELLED",)
    assert apply(conn, "retry", Selection(state="FAILED")) == 50
    assert conn.execute("SELECT state, waiting FROM awc.jobs WHERE id = %s",
                        (child,)).fetchone() == ("PENDING", 50)
    drain(conn)
    row = conn.execute(
        "SELECT c.state, c.attempts, bool_and(p.finished_at <= c.started_at) "
        "FROM awc.jobs AS c, awc.jobs AS p WHERE c.id = %s AND p.id = ANY(%s) "
        "GROUP BY c.state, c.attempts", (child, parents)).fetchone()
    assert row == ("COMPLETED", 1, True)


def test_a_run_child_waits_for_its_retried_parent_again(conn: psycopg.Connection[Any]) -> None:
    parent, other, child = enqueue_many(conn, [
        {"kind": "noop"}, {"kind": "noop"},
        {"kind": "noop", "after": ["#0", "#1"], "on_parent_failure": "run"}])
    fail(conn, [parent])
    assert conn.execute("SELECT waiting FROM awc.jobs WHERE id = %s", (child,)).fetchone() == (1,)
    retry(conn, parent)
    assert conn.execute("SELECT waiting FROM awc.jobs WHERE id = %s", (child,)).fetchone() == (2,)
    drain(conn)
    row = conn.execute(
        "SELECT bool_and(p.finished_at <= c.started_at) FROM awc.jobs AS c, awc.jobs AS p "
        "WHERE c.id = %s AND p.id = ANY(%s)", (child, [parent, other])).fetchone()
    assert row == (True,)


@pytest.mark.parametrize("seed", range(12))
def test_every_retry_leaves_each_pending_job_counting_its_unfinished_parents(
        conn: psycopg.Connection[Any], seed: int) -> None:
    """Random graphs (each job up to three earlier parents, either policy):
    some roots fail, then one is retried alone, then all that failed or were
    cancelled are retried at once."""
    rnd = random.Random(seed)
    jobs: list[dict[str, Any]] = []
    for n in range(rnd.randint(10, 60)):
        parents = sorted({f"#{rnd.randrange(n)}" for _ in range(rnd.randint(0, 3))}) if n else []
        jobs.append({"kind": "noop", **({"after": parents} if parents else {}),
                     "on_parent_failure": rnd.choice(["cancel", "run"])})
    ids = enqueue_many(conn, jobs)
    roots = rnd.sample(ids, k=3)
    fail(conn, roots)
    assert miscounted(conn) == []
    retry(conn, roots[0])
    assert miscounted(conn) == []
    apply(conn, "retry", Selection(state="CANCELLED"))
    assert miscounted(conn) == []
    apply(conn, "retry", Selection(state="FAILED"))
    assert miscounted(conn) == []


@pytest.mark.parametrize("how", ["one", "bulk"])
@pytest.mark.parametrize("parent_done_during_the_run", [False, True])
def test_a_run_child_running_when_its_parent_is_retried_waits_for_it(
        conn: psycopg.Connection[Any], how: str, parent_done_during_the_run: bool) -> None:
    """A `run` child started because its parent failed; an operator retries
    the parent while the child runs, and the run ends in a Retry. The child
    is PENDING again and must wait for the revived parent (it was claimed
    and completed while the parent was PENDING); and if the parent completed
    meanwhile, it must not wait for it for ever."""
    parent, child = enqueue_many(conn, [
        {"kind": "noop"}, {"kind": "child", "after": ["#0"], "on_parent_failure": "run"}])
    fail(conn, [parent])
    operator = psycopg.connect(conn.info.dsn, autocommit=True)

    def run_child(ctx: JobContext, payload: Any) -> Retry | Complete:
        if ctx.attempts > 1:
            return Complete()
        if how == "one":
            retry(operator, parent)
        else:
            assert apply(operator, "retry", Selection(state="FAILED")) == 1
        if parent_done_during_the_run:
            assert tick(operator, registry=registry_with(noop=ok), kinds=["noop"],
                        max_secs=30).completed == 1
        return Retry()

    kinds = registry_with(noop=ok, child=run_child)
    try:
        assert tick(conn, registry=kinds, kinds=["child"], max_secs=30).retried == 1
        state = conn.execute("SELECT state, waiting FROM awc.jobs WHERE id = %s",
                             (child,)).fetchone()
        assert state == ("PENDING", 0 if parent_done_during_the_run else 1)
        assert miscounted(conn) == []
        conn.execute("UPDATE awc.jobs SET run_at = now() WHERE id = %s", (child,))  # no backoff
        if not parent_done_during_the_run:
            assert tick(conn, registry=kinds, kinds=["child"], max_secs=30).claimed == 0
        for _ in range(10):
            if tick(conn, registry=kinds, max_secs=30, concurrency=1).claimed == 0:
                break
        row = conn.execute(
            "SELECT c.state, c.attempts, p.state, p.finished_at <= c.started_at "
            "FROM awc.jobs AS c, awc.jobs AS p WHERE c.id = %s AND p.id = %s",
            (child, parent)).fetchone()
        assert row == ("COMPLETED", 2, "COMPLETED", True)
    finally:
        operator.close()


@pytest.mark.parametrize("outcome", ["completed", "failed"])
def test_a_parents_outcome_during_a_retry_is_counted_for_the_child_it_revives(
        conn: psycopg.Connection[Any], db_url: str, outcome: str) -> None:
    """X waits for T and A; T failed, so X was cancelled. An operator
    retries T while A's outcome commits. The outcome counted down only the
    children it saw PENDING or RUNNING, and X, still CANCELLED in its
    snapshot, was passed by, while the retry had counted A unfinished: X
    waited for ever (PENDING, waiting 1, every parent final). The retry now
    locks the parents not final first, and the outcome waits for it."""
    import threading

    from tests.support import seen_waiting_on_a_lock
    from tick.bulk import revive
    from tick.statements import sql

    t, a, x = enqueue_many(conn, [{"kind": "noop"}, {"kind": "noop"},
                                  {"kind": "noop", "after": ["#0", "#1"]}])
    fail(conn, [t])
    assert conn.execute("SELECT state FROM awc.jobs WHERE id = %s", (x,)).fetchone() == (
        "CANCELLED",)
    row = conn.execute("UPDATE awc.jobs SET state = 'RUNNING', attempts = 1, started_at = now(), "
                       "claim_token = gen_random_uuid(), locked_until = now() + interval '1 hour' "
                       "WHERE id = %s RETURNING claim_token::text", (a,)).fetchone()
    assert row is not None
    with psycopg.connect(db_url, autocommit=True) as other:
        pid = other.info.backend_pid

        def record() -> None:  # A's outcome, as a tick records it
            if outcome == "completed":
                other.execute(sql("complete_jobs"), {"ids": f"{{{a}}}", "tokens": f"{{{row[0]}}}",
                                                     "results": "{null}"}).fetchall()
            else:
                other.execute("UPDATE awc.jobs SET state = 'FAILED', finished_at = now() "
                              "WHERE id = %s", (a,))

        recording = threading.Thread(target=record)
        with conn.transaction():
            assert revive(conn, [t]) == 1
            recording.start()
            # It waits for the retry (before: it committed at once, past X).
            seen_waiting_on_a_lock(conn, pid, timeout=3)
        recording.join(timeout=30)
        assert not recording.is_alive()
    assert miscounted(conn) == []
    drain(conn)
    states = dict(conn.execute("SELECT id, state FROM awc.jobs").fetchall())
    assert states == {t: "COMPLETED", a: outcome.upper(),
                      x: "COMPLETED" if outcome == "completed" else "CANCELLED"}


@pytest.mark.parametrize("ahead", ["priority", "run_at"])
def test_one_tick_claims_a_child_its_outcome_made_ready_behind_its_cursor(
        conn: psycopg.Connection[Any], ahead: str) -> None:
    """A callback of higher priority than its 100 parents (or due earlier)
    sorts before them in the claim order: made ready by the tick's own
    completion, behind the tick's cursor, it was found by the next claim's
    look at the transactions since, which a one-shot tick that had drained
    never made; it ran a cron interval later."""
    child: dict[str, Any] = {"kind": "noop", "after": [f"#{n}" for n in range(100)],
                             "on_parent_failure": "run"}
    if ahead == "priority":
        child["priority"] = 5
    else:
        child["run_at"] = datetime(2000, 1, 1, tzinfo=UTC)
    ids = enqueue_many(conn, [{"kind": "noop"} for _ in range(100)] + [child])
    report = tick(conn, registry=registry_with(noop=ok), max_secs=30, max_jobs=1000,
                  concurrency=8)
    assert report.claimed == 101
    assert conn.execute("SELECT state FROM awc.jobs WHERE id = %s", (ids[-1],)).fetchone() == (
        "COMPLETED",)


def test_a_run_childs_count_is_right_when_a_parent_completes_during_the_retry(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    """X (`run`) waits for T, failed, and A, running: X is PENDING, waiting
    for A. A's completion is sent, not committed, as an operator retries T:
    the recount of T's children read A unfinished from a snapshot before
    A's commit and kept that, after waiting for X's row: X waited for a
    parent already done, for ever after T completed."""
    import threading

    from tests.support import seen_waiting_on_a_lock
    from tick.statements import sql

    t, a, x = enqueue_many(conn, [{"kind": "noop"}, {"kind": "noop"},
                                  {"kind": "noop", "after": ["#0", "#1"],
                                   "on_parent_failure": "run"}])
    row = conn.execute("UPDATE awc.jobs SET state = 'RUNNING', attempts = 1, started_at = now(), "
                       "claim_token = gen_random_uuid(), locked_until = now() + interval '1 hour' "
                       "WHERE id = %s RETURNING claim_token::text", (a,)).fetchone()
    assert row is not None
    fail(conn, [t])
    with psycopg.connect(db_url, autocommit=True) as other, \
            psycopg.connect(db_url, autocommit=True) as op:
        other.execute("BEGIN")
        other.execute(sql("complete_jobs"), {"ids": f"{{{a}}}", "tokens": f"{{{row[0]}}}",
                                             "results": "{null}"}).fetchall()
        retrying = threading.Thread(target=lambda: retry(op, t))
        retrying.start()
        seen_waiting_on_a_lock(conn, op.info.backend_pid, timeout=5)
        other.execute("COMMIT")
        retrying.join(timeout=30)
    assert miscounted(conn) == []
    drain(conn)
    assert dict(conn.execute("SELECT id, state FROM awc.jobs").fetchall()) == {
        t: "COMPLETED", a: "COMPLETED", x: "COMPLETED"}


def test_a_retry_that_meets_a_round_trip_in_a_deadlock_runs_again(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    """The retry locks T's child's other parents in id order; a tick's round
    trip completes P2, then renews P1's lease in a later statement: each
    waits for the other, and PostgreSQL ended the retry (`awc: database
    error: DeadlockDetected`). The retry runs again and succeeds."""
    import threading

    from tests.support import seen_waiting_on_a_lock
    from tick.statements import sql

    t, p1, p2, x = enqueue_many(conn, [{"kind": "noop"}] * 3 + [
        {"kind": "noop", "after": ["#0", "#1", "#2"]}])
    fail(conn, [t])
    claim = ("UPDATE awc.jobs SET state = 'RUNNING', attempts = 1, started_at = now(), "
             "claim_token = gen_random_uuid(), locked_until = now() + interval '1 hour' "
             "WHERE id = %s RETURNING claim_token::text")
    tokens = [(conn.execute(claim, (p,)).fetchone() or ("",))[0] for p in (p1, p2)]
    failed: list[BaseException] = []

    def operator() -> None:
        try:
            retry(op, t)
        except BaseException as error:  # the test reports it
            failed.append(error)

    with psycopg.connect(db_url, autocommit=True) as ticking, \
            psycopg.connect(db_url, autocommit=True) as op:
        ticking.execute("BEGIN")
        ticking.execute(sql("complete_jobs"), {"ids": f"{{{p2}}}", "tokens": f"{{{tokens[1]}}}",
                                               "results": "{null}"}).fetchall()
        retrying = threading.Thread(target=operator)
        retrying.start()
        assert seen_waiting_on_a_lock(conn, op.info.backend_pid, timeout=5)
        try:
            ticking.execute(sql("extend_leases"), {"ids": [p1], "tokens": [tokens[0]],
                                                   "secs": [30.0]}).fetchall()
            ticking.execute("COMMIT")
        except psycopg.errors.DeadlockDetected:
            ticking.execute("ROLLBACK")
        retrying.join(timeout=30)
    assert failed == []
    assert conn.execute("SELECT state FROM awc.jobs WHERE id = %s", (x,)).fetchone() == (
        "PENDING",)
    assert miscounted(conn) == []
