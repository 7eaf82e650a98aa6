"""SPEC §20 under the engine's pinned plans (migration 0025): the functions
that declare and settle dependencies plan their own statements, so a parent
with many children settles them in one pass however the engine has pinned
its transaction's planner and whatever the table's statistics say.

Before migration 0025, in a database whose statistics were taken with few
children waiting (here: none at all), completing a parent of 10,000
children took 15 s in one statement and failing one took 40 s: a nested
loop rescanned the children's array once per child."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from tests import claiming
from tick.engine.cursor import Cursor
from tick.producer import enqueue_many
from tick.statements import sql

pytestmark = pytest.mark.timeout(180)

# Each of them runs set-wise joins over a parent's children or a child's
# parents; since migration 0026 the first two find every row by key.
DEPENDENCY_FUNCTIONS = ("settle_children", "count_waiting", "revive_descendants",
                        "declare_parents")
SETTLED_BY_KEY = ("settle_children", "count_waiting", "revive_descendants")
# The completion's settle joins nothing: it finds every row by key, in id order.
BY_KEY = {"enable_seqscan=off", "enable_bitmapscan=off"}
OWN_PLANNER = {"enable_seqscan=on", "enable_bitmapscan=on", "enable_sort=on",
               "enable_hashjoin=on", "enable_mergejoin=on", "enable_material=on",
               "plan_cache_mode=force_custom_plan", "jit=off"}
CHILDREN = 10_000
# A bound far above the linear pass (about 0.2 s on a 2-core machine) and
# far below the quadratic one it replaced (15 and 40 s on the same machine).
BOUND = "8s"


def test_each_dependency_function_plans_with_its_own_settings(
    conn: psycopg.Connection[Any],
) -> None:
    rows = dict(conn.execute(
        "SELECT proname, proconfig FROM pg_proc "
        "WHERE pronamespace = 'awc'::regnamespace AND proname = ANY(%s)",
        ([*DEPENDENCY_FUNCTIONS, "settle_completed", "lock_revived_parents"],)).fetchall())
    assert set(rows.pop("settle_completed")) == BY_KEY
    # An operator's retry's walk (migration 0037): no join a statistic can turn into a hash.
    assert set(rows.pop("lock_revived_parents")) == BY_KEY | {
        "enable_hashjoin=off", "enable_mergejoin=off", "jit=off"}
    assert sorted(rows) == sorted(DEPENDENCY_FUNCTIONS)
    for name in SETTLED_BY_KEY:  # migration 0026
        assert set(rows.pop(name) or ()) == BY_KEY | {"plan_cache_mode=force_generic_plan",
                                                      "jit=off"}, name
    for name, config in rows.items():
        assert set(config or ()) == OWN_PLANNER, name


def fan_out(conn: psycopg.Connection[Any], policy: str) -> tuple[int, list[int]]:
    """A parent and CHILDREN children, the parent claimed (RUNNING with a token),
    the table never analyzed."""
    ids = enqueue_many(conn, [{"kind": "noop"}] + [
        {"kind": "noop", "after": ["#0"], "on_parent_failure": policy}
        for _ in range(CHILDREN)])
    return ids[0], ids[1:]


def record(conn: psycopg.Connection[Any], statement: str, parents: list[int],
           params: dict[str, Any]) -> None:
    """Claim the parents (RUNNING, a token each), then record their outcome
    as `outcome` does, under BOUND."""
    tokens = [uuid.uuid4() for _ in parents]
    with conn.transaction():
        conn.execute("UPDATE ONLY awc.jobs AS j SET state = 'RUNNING', claim_token = t.token, "
                     "attempts = 1, started_at = now(), "
                     "locked_until = now() + interval '1 hour' "
                     "FROM unnest(%s::bigint[], %s::uuid[]) AS t (id, token) WHERE j.id = t.id",
                     (parents, tokens))
    assert len(outcome(conn, statement, parents, tokens, params)) == len(parents)


def outcome(conn: psycopg.Connection[Any], statement: str, ids: list[int], tokens: list[Any],
            params: dict[str, Any]) -> list[Any]:
    """The engine's own outcome statement for claimed jobs, run the way the
    engine runs it: plans pinned (pin_plans.sql), prepared, in one statement,
    under BOUND."""
    with conn.transaction():
        conn.execute(sql("pin_plans"))
        conn.execute("SELECT set_config('statement_timeout', %s, true)", (BOUND,))
        return conn.execute(sql(statement), {"ids": ids, "tokens": tokens, **params},
                            prepare=True).fetchall()


def record_claimed(conn: psycopg.Connection[Any], job: int) -> None:
    """Complete a job a test's claim took, with its own token."""
    row = conn.execute("SELECT claim_token FROM awc.jobs WHERE id = %s", (job,)).fetchone()
    assert row is not None
    assert len(outcome(conn, "complete_jobs", [job], [row[0]], {"results": [None]})) == 1


def child_states(conn: psycopg.Connection[Any], children: list[int]) -> dict[tuple[str, int], int]:
    return {(state, waiting): n for state, waiting, n in conn.execute(
        "SELECT state, waiting, count(*) FROM awc.jobs WHERE id = ANY(%s) GROUP BY 1, 2",
        (children,)).fetchall()}


@pytest.mark.slow
def test_a_parent_of_many_children_completes_in_one_pass_under_pinned_plans(
    conn: psycopg.Connection[Any],
) -> None:
    parent, children = fan_out(conn, "cancel")
    record(conn, "complete_jobs", [parent], {"results": [None]})
    assert child_states(conn, children) == {("PENDING", 0): CHILDREN}


@pytest.mark.slow
@pytest.mark.parametrize(("policy", "after"), [("cancel", ("CANCELLED", 1)),
                                                ("run", ("PENDING", 0))])
def test_a_parent_of_many_children_fails_in_one_pass_under_pinned_plans(
    conn: psycopg.Connection[Any], policy: str, after: tuple[str, int],
) -> None:
    parent, children = fan_out(conn, policy)
    record(conn, "fail_jobs", [parent], {"errors": ["boom"], "tracebacks": [None]})
    assert child_states(conn, children) == {after: CHILDREN}


def test_children_counted_by_several_parents_of_one_completion_count_each_once(
    conn: psycopg.Connection[Any],
) -> None:
    """The settle's other path: children whose parents complete together are
    counted down by how many of them did, each child once."""
    ids = enqueue_many(conn, [{"kind": "noop"}, {"kind": "noop"}, {"kind": "noop"},
                              {"kind": "noop", "after": ["#0", "#1"]},
                              {"kind": "noop", "after": ["#0"]},
                              {"kind": "noop", "after": ["#0", "#1", "#2"]},
                              {"kind": "noop", "after": ["#2"]}])
    record(conn, "complete_jobs", ids[:2], {"results": [None, None]})
    waiting = dict(conn.execute("SELECT id, waiting FROM awc.jobs WHERE id = ANY(%s)",
                                (ids[3:],)).fetchall())
    assert [waiting[i] for i in ids[3:]] == [0, 0, 1, 1]


def test_one_parents_completion_counts_each_of_its_children_down_once(
    conn: psycopg.Connection[Any],
) -> None:
    """The settle's one-parent path (migration 0036: the children straight
    from job_parents_parent_idx, no grouping): each child of the completed
    parent is counted down once, whatever its other parents and in whatever
    order they were named; a child no longer PENDING or RUNNING is left."""
    ids = enqueue_many(conn, [{"kind": "noop"}, {"kind": "noop"},
                              {"kind": "noop", "after": ["#0"]},
                              {"kind": "noop", "after": ["#0", "#1"]},
                              {"kind": "noop", "after": ["#1", "#0", "#0"]},
                              {"kind": "noop", "after": ["#0"]},
                              {"kind": "noop", "after": ["#1"]}])
    conn.execute("UPDATE awc.jobs SET state = 'CANCELLED', finished_at = now() WHERE id = %s",
                 (ids[5],))
    record(conn, "complete_jobs", ids[:1], {"results": [None]})
    rows = {i: (state, waiting) for i, state, waiting in conn.execute(
        "SELECT id, state, waiting FROM awc.jobs WHERE id = ANY(%s)", (ids[2:],)).fetchall()}
    assert [rows[i] for i in ids[2:]] == [("PENDING", 0), ("PENDING", 1), ("PENDING", 1),
                                         ("CANCELLED", 1), ("PENDING", 1)]


def test_a_child_released_behind_a_claimers_cursor_is_claimed_next(
    conn: psycopg.Connection[Any],
) -> None:
    """The settle stamps the children it makes ready with its transaction
    (SPEC §24), as the row trigger it now skips did: a claimer whose cursor
    has passed the child finds it by that stamp on its next claim."""
    parent, child = enqueue_many(conn, [{"kind": "noop"}, {"kind": "noop", "after": ["#0"]}])
    later = claiming.enqueue(conn, 5)
    cursor = Cursor()
    taken = claiming.claim(conn, cursor, 10)
    assert sorted(taken) == sorted([parent, *later])  # the cursor is past the child
    record_claimed(conn, parent)
    assert claiming.claim(conn, cursor, 10) == [child]


CHAIN = 10_000


@pytest.mark.slow
@pytest.mark.parametrize("analyzed", ["never", "small", "waiting"])
def test_the_head_of_a_long_chain_fails_and_is_retried_within_the_bound(
    conn: psycopg.Connection[Any], analyzed: str,
) -> None:
    """A chain's failure cancels it level by level, and an operator's retry
    revives it so, each level found by key (migration 0026). On a table
    never analyzed, the failure of the head of a chain of 10,000 ran past
    the 60 s statement timeout before (one recursive join, the whole graph
    hashed at every level), and a chain's retry took time in the square of
    its length (24 s for 5,000); each now takes well under a second. On a
    table analyzed while the chain waited, the retry's test for a parent
    still failed read every failed and cancelled job at each level
    (migration 0030: 55 s for 10,000). The retry's lock of the parents it
    counts walked down as the session's planner chose: on a table never
    analyzed, or analyzed while it held two jobs (autovacuum on a young
    queue), each level hashed every edge (11 s on PostgreSQL 15, past the
    bound under load on 18); by key since migration 0037."""
    from tick.admin import retry

    def analyze() -> None:
        conn.execute("ANALYZE awc.jobs")
        conn.execute("ANALYZE awc.job_parents")

    if analyzed == "small":
        enqueue_many(conn, [{"kind": "noop"}, {"kind": "noop", "after": ["#0"]}])
        analyze()
    ids = enqueue_many(conn, [{"kind": "noop"}] + [
        {"kind": "noop", "after": [f"#{n}"]} for n in range(CHAIN - 1)])
    if analyzed == "waiting":
        analyze()
    record(conn, "fail_jobs", [ids[0]], {"errors": ["boom"], "tracebacks": [None]})
    assert child_states(conn, ids[1:]) == {("CANCELLED", 1): CHAIN - 1}
    first = conn.execute("SELECT last_error FROM awc.jobs WHERE id = %s", (ids[1],)).fetchone()
    last = conn.execute("SELECT last_error FROM awc.jobs WHERE id = %s", (ids[-1],)).fetchone()
    assert first == (f"ParentFailed: parent job {ids[0]} ended FAILED",)
    assert last == (f"ParentFailed: parent job {ids[-2]} ended CANCELLED",)
    with conn.transaction():
        conn.execute("SELECT set_config('statement_timeout', %s, true)", (BOUND,))
        retry(conn, ids[0])
    assert child_states(conn, ids) == {("PENDING", 0): 1, ("PENDING", 1): CHAIN - 1}


def edges_read(conn: psycopg.Connection[Any]) -> int:
    """Entries read from job_parents' primary key so far (its own statistics)."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT 1")  # the flush happens at this statement's end
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute("SELECT idx_tup_read FROM pg_stat_user_indexes "
                       "WHERE indexrelname = 'job_parents_pkey'").fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("retried", [False, True])
def test_each_parent_of_a_fan_in_that_fails_or_is_retried_reads_its_own_edge(
    conn: psycopg.Connection[Any], retried: bool,
) -> None:
    """Migration 0031: a parent's failure counted its children down over
    each child's every edge (`parent_id = ANY` a filter in the generic plan),
    and an operator's retry counted them up so: a fan-in of 10,000 parents
    that all failed took 18 s, against 1.6 s without the child."""
    from tick.bulk import revive

    parents = 2_000
    ids = enqueue_many(conn, [{"kind": "noop"} for _ in range(parents)] + [
        {"kind": "noop", "after": [f"#{n}" for n in range(parents)],
         "on_parent_failure": "run"}])
    before = edges_read(conn)
    for at in range(0, parents, 16):  # one batch of failures at a time, as ticks record them
        record(conn, "fail_jobs", ids[at:at + 16], {"errors": ["boom"] * len(ids[at:at + 16]),
                                                    "tracebacks": [None] * len(ids[at:at + 16])})
    if retried:  # an operator's retry of 200 of them, one statement (the console's bulk retry)
        with conn.transaction():
            assert revive(conn, ids[:200]) == 200
    read = edges_read(conn) - before
    assert child_states(conn, ids[-1:]) == {("PENDING", 200 if retried else 0): 1}
    # About one entry per failure or retry: before, each read all 2,000.
    assert read < 10 * parents, read
