"""EXPLAIN guards (SPEC §14, STYLE): the claim, rescue and prune statements
use their indexes, never a sequential scan of awc.jobs, on a table of
realistic size — and, for the claim, even when its statistics are stale."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.support import migrated_database, nodes, scans, seq_scanned, sorted_walk
from tick.maintenance import PRUNE_BATCH, RESCUE_LIMIT
from tick.queue import NO_CURSOR, new_nonce
from tick.statements import sql

CLAIM = {"slots": [f"w-{n}" for n in range(256)], "lease": 300.0, "cap": 300.0,
         "leases": "{}", "kinds": None, "queues": None, "queue": None, **NO_CURSOR,
         "nonce": new_nonce()}


@pytest.fixture(scope="module")
def big(server_url: str, template_db: str) -> Iterator[str]:
    """A 200,000-job table: mostly finished, some running, some ready."""
    with migrated_database(server_url, template_db) as url, \
            psycopg.connect(url, autocommit=True) as conn:
        conn.execute("""
            INSERT INTO awc.jobs (kind, state, queue, priority, attempts, run_at, locked_until,
                                  claim_token, finished_at)
            SELECT 'k' || (n % 7),
                   CASE WHEN n % 10 < 7 THEN 'COMPLETED' WHEN n % 10 < 8 THEN 'FAILED'
                        WHEN n % 10 < 9 THEN 'RUNNING' ELSE 'PENDING' END,
                   'q' || (n % 3), (n % 5)::smallint, 1, now() - interval '1 hour',
                   CASE WHEN n % 10 = 8 THEN now() - make_interval(secs => n % 600) END,
                   CASE WHEN n % 10 = 8 THEN gen_random_uuid() END,
                   CASE WHEN n % 10 < 8 THEN now() - make_interval(days => n % 14) END
            FROM generate_series(1, 200000) AS n""")
        conn.execute("ANALYZE awc.jobs")
        yield url


def plan(url: str, statement: str, params: dict[str, Any], *, pinned: bool) -> str:
    with psycopg.connect(url) as conn:  # a transaction, rolled back: EXPLAIN ANALYZE writes
        if pinned:
            conn.execute(sql("pin_plans"))
        rows = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, params).fetchone()
        conn.rollback()
    assert rows is not None
    return json.dumps(rows[0])


def test_claim_walks_the_ready_index_in_order(big: str) -> None:
    found = scans(plan(big, sql("claim_jobs"), CLAIM, pinned=True))
    assert ("Index Scan", "jobs_ready_idx") in found
    assert not any(node == "Seq Scan" for node, _ in found), found
    assert not sorted_walk(plan(big, sql("claim_jobs"), CLAIM, pinned=True))


def test_claim_by_one_queue_walks_the_queue_index_in_order(big: str) -> None:
    params = {**CLAIM, "queue": "q1"}
    text = plan(big, sql("claim_jobs_in_queue"), params, pinned=True)
    assert ("Index Scan", "jobs_ready_queue_idx") in scans(text)
    assert not sorted_walk(text) and '"Seq Scan"' not in text


def test_claim_by_several_queues_needs_no_table_scan(big: str) -> None:
    params = {**CLAIM, "queues": ["q1", "q2"]}
    text = plan(big, sql("claim_jobs"), params, pinned=True)
    assert '"Seq Scan"' not in text and not sorted_walk(text)


def test_claim_stays_on_its_index_with_stale_statistics(big: str) -> None:
    """The table analyzed when it was small, then filled: the pin keeps the
    ordered index scan (unpinned, the planner bitmap-scans and sorts)."""
    with psycopg.connect(big, autocommit=True) as conn:
        # What the planner believes right after a deploy: an all but empty table.
        conn.execute("UPDATE pg_class SET reltuples = 10, relpages = 1 "
                     "WHERE oid = 'awc.jobs'::regclass")
    text = plan(big, sql("claim_jobs"), CLAIM, pinned=True)
    assert not sorted_walk(text) and ("Index Scan", "jobs_ready_idx") in scans(text)
    with psycopg.connect(big, autocommit=True) as conn:
        conn.execute("ANALYZE awc.jobs")


def limited_plans(url: str, limits: list[tuple[str, str, int | None, int | None]]
                  ) -> tuple[str, str]:
    """The plans of the limited claim and of the usual claim after it, in one
    transaction with these (scope, name, max_running, rate) limits (rolled back)."""
    with psycopg.connect(url) as conn:
        for scope, name, most, rate in limits:
            conn.execute("INSERT INTO awc.limits (scope, name, max_running, rate, per_secs) "
                         "VALUES (%s, %s, %s, %s, %s)",
                         (scope, name, most, rate, None if rate is None else 60))
        conn.execute(sql("pin_plans"))
        conn.execute(sql("claim_limits"), CLAIM)
        texts = []
        for name in ("claim_limited_jobs", "claim_jobs"):
            row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql(name), CLAIM).fetchone()
            assert row is not None
            texts.append(json.dumps(row[0]))
        conn.rollback()
    return texts[0], texts[1]


def test_the_limited_claim_finds_its_jobs_by_index(big: str) -> None:
    """SPEC §18: with limits, the claim reads ready jobs lane by lane from
    their own index (decision 0018-claims-by-lane), running jobs from the
    lease index; the usual claim after it keeps its ordered walk, for when
    no limit exists."""
    limited, usual = limited_plans(big, [("kind", "k3", 100_000, None),
                                         ("queue", "q1", None, 100_000)])
    found = scans(limited)
    assert ("Index Scan", "jobs_ready_lane_idx") in found, found
    assert ("Index Only Scan", "jobs_ready_lane_idx") in found, found
    assert not seq_scanned(limited, "jobs"), found  # awc.limits is small: read as it likes
    assert '"JIT"' not in limited  # the pin's cost penalty must not buy a compile
    assert ("Index Scan", "jobs_ready_idx") in scans(usual)
    assert not sorted_walk(usual) and '"Seq Scan"' not in usual
    claimed = json.loads(limited)[0]["Plan"]["Actual Rows"]
    # The limits did not bind: every slot filled by limited jobs, and the row
    # that says whether any were held back.
    assert claimed == 256 + 1


def test_fenced_complete_probes_the_primary_key(big: str) -> None:
    with psycopg.connect(big) as conn:
        rows = conn.execute("SELECT id, claim_token::text FROM awc.jobs WHERE state = 'RUNNING' "
                            "LIMIT 256").fetchall()
    params = {"ids": [r[0] for r in rows], "tokens": [r[1] for r in rows],
              "results": [None] * len(rows)}
    found = scans(plan(big, sql("complete_jobs"), params, pinned=True))
    assert found == COMPLETE_SCANS, found


@pytest.fixture(scope="module")
def fresh_drain(server_url: str, template_db: str) -> Iterator[tuple[str, list[tuple[int, str]]]]:
    """What a drain looks like to the planner: 20,000 jobs analyzed while all
    were PENDING, then 512 claimed, so the statistics say none is RUNNING."""
    with migrated_database(server_url, template_db) as url, \
            psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO awc.jobs (kind, payload) "
                     "SELECT 'noop', '{\"n\": 1}' FROM generate_series(1, 20000)")
        conn.execute("ANALYZE awc.jobs")
        claimed = [row for _ in range(2) for row in conn.execute(sql("claim_jobs"), CLAIM)]
        yield url, [(row[0], row[5]) for row in claimed[:256]]


# A completion also reads which finished part is current (SPEC §24): one
# probe of a one-row index, then the batch by primary key.
COMPLETE_SCANS = [("Index Scan", "done_parts_current_idx"), ("Index Scan", "jobs_pkey")]

FENCED = {
    "complete_jobs": lambda n: {"results": [None] * n},
    "retry_jobs": lambda n: {"errors": ["Retry: later"] * n, "delays": [1.0] * n,
                             "tracebacks": [None] * n},
    "fail_jobs": lambda n: {"errors": ["Fail: no"] * n, "tracebacks": [None] * n},
    "release_jobs": lambda n: {},
    "extend_leases": lambda n: {"secs": [60.0] * n},
    "continue_jobs": lambda n: {"states": ['{"next": 1}'] * n, "delays": [0.0] * n},
    "checkpoint_jobs": lambda n: {"states": ['{"next": 1}'] * n, "progress": [0.5] * n,
                                  "secs": [60.0] * n},
}


@pytest.mark.parametrize("name", sorted(FENCED))
def test_fenced_writes_probe_the_primary_key_with_stale_statistics(
    fresh_drain: tuple[str, list[tuple[int, str]]], name: str
) -> None:
    """Every fenced write takes its batch's rows by primary key, never by a
    walk of the RUNNING rows joined to the batch (SPEC §14, migration 0003):
    that nested loop cost 35 ms instead of 4 ms for 256 completions."""
    url, held = fresh_drain
    params = {"ids": [job_id for job_id, _ in held], "tokens": [token for _, token in held],
              **FENCED[name](len(held))}
    text = plan(url, sql(name), params, pinned=True)
    want = COMPLETE_SCANS if name == "complete_jobs" else [("Index Scan", "jobs_pkey")]
    assert scans(text) == want, scans(text)
    assert "\"Join Filter\"" not in text, text


def test_rescue_walks_the_lease_index(big: str) -> None:
    found = scans(plan(big, sql("rescue_jobs"), {"limit": RESCUE_LIMIT, "key": 1}, pinned=True))
    assert ("Index Scan", "jobs_lease_idx") in found
    assert not any(node == "Seq Scan" for node, _ in found), found


def test_prune_walks_the_finished_index(big: str) -> None:
    found = scans(plan(big, sql("prune_jobs"), {"after_secs": 7 * 86400.0,
                                                 "limit": PRUNE_BATCH}, pinned=True))
    assert any(index == "jobs_finished_idx" for _, index in found), found
    assert not any(node == "Seq Scan" for node, _ in found), found


def test_dead_letter_retention_walks_the_failed_index(big: str) -> None:
    # SPEC §22: old FAILED jobs, oldest first, a range of their own index.
    found = scans(plan(big, sql("prune_dead_letters"), {"after_secs": 7 * 86400.0,
                                                         "limit": PRUNE_BATCH}, pinned=True))
    assert any(index == "jobs_failed_finished_idx" for _, index in found), found
    assert not any(node == "Seq Scan" for node, _ in found), found


def generic_plan(url: str, name: str, params: dict[str, Any],
                 limits: list[tuple[str, str, int | None, int | None]] | None = None) -> str:
    """The plan a prepared statement runs with after psycopg prepared it:
    the generic one, which the pin forces (`plan_cache_mode`), so no
    execution pays for planning. PostgreSQL 15 has no EXPLAIN (GENERIC_PLAN):
    the statement is PREPAREd with psycopg's own $n conversion and its plan
    shown by EXPLAIN EXECUTE, in a transaction rolled back."""
    from psycopg._queries import PostgresQuery
    from psycopg.adapt import Transformer

    with psycopg.connect(url) as conn:
        for scope, target, most, rate in limits or []:
            conn.execute("INSERT INTO awc.limits (scope, name, max_running, rate, per_secs) "
                         "VALUES (%s, %s, %s, %s, %s)",
                         (scope, target, most, rate, None if rate is None else 60))
        conn.execute(sql("pin_plans"))
        if limits is not None:
            conn.execute(sql("claim_limits"), params)
        query = PostgresQuery(Transformer(conn))
        query.convert(sql(name), params)
        # The types psycopg sends with the values (a parameter may appear only
        # in a comment, where the server cannot infer it).
        types = [row[0] for row in conn.execute(
            "SELECT CASE WHEN t = 0 THEN 'text' ELSE format_type(t, NULL) END "
            "FROM unnest(%s::oid[]) WITH ORDINALITY AS u (t, n) ORDER BY n",
            (list(query.types),))]  # 0: a string or a null, sent untyped
        conn.execute(f"PREPARE awc_generic ({', '.join(types)}) AS ".encode() + query.query)
        from psycopg import sql as compose

        order = query._order or []  # the names, in $n order
        values = compose.SQL(", ").join(compose.Literal(params[n]) for n in order)
        row = conn.execute(compose.SQL("EXPLAIN (FORMAT JSON) EXECUTE awc_generic({})")
                           .format(values)).fetchone()
        conn.rollback()
    assert row is not None
    return json.dumps(row[0])


def test_generic_plans_keep_their_indexes(big: str) -> None:
    """The pinned transaction forces generic plans; they must walk the same
    indexes as the custom plans the tests above check."""
    claim = generic_plan(big, "claim_jobs", CLAIM)
    assert ("Index Scan", "jobs_ready_idx") in scans(claim) and not sorted_walk(claim)
    limited = generic_plan(big, "claim_limited_jobs", CLAIM, [("kind", "k3", 100_000, None),
                                                             ("queue", "q1", None, 100_000)])
    found = scans(limited)
    assert ("Index Scan", "jobs_ready_lane_idx") in found, found
    assert not seq_scanned(limited, "jobs")
    rescue = scans(generic_plan(big, "rescue_jobs", {"limit": RESCUE_LIMIT, "key": 1}))
    assert ("Index Scan", "jobs_lease_idx") in rescue
    with psycopg.connect(big) as conn:
        rows = conn.execute("SELECT id, claim_token::text FROM awc.jobs WHERE state = 'RUNNING' "
                            "LIMIT 256").fetchall()
    complete = scans(generic_plan(big, "complete_jobs", {
        "ids": [r[0] for r in rows], "tokens": [r[1] for r in rows], "results": [None] * 256}))
    assert complete == COMPLETE_SCANS, complete


def passed_walk(text: str) -> list[dict[str, Any]]:
    """The scans of awc.jobs in the claim's `passed` CTE (the jobs due later
    that the next cursor passes over, decision 0027)."""
    from tests.support import nodes

    ctes = [n for n in nodes(text) if n.get("Subplan Name") == "CTE passed"]
    assert len(ctes) == 1, [n.get("Subplan Name") for n in nodes(text)]
    return [n for n in nodes(json.dumps(ctes[0])) if n.get("Relation Name") == "jobs"]


@pytest.mark.parametrize(("name", "index", "params"), [
    ("claim_jobs", "jobs_ready_idx", CLAIM),
    ("claim_jobs_in_queue", "jobs_ready_queue_idx", {**CLAIM, "queue": "q1"}),
])
def test_the_claims_passed_walk_is_bounded_on_its_ready_index(
        big: str, name: str, index: str, params: dict[str, Any]) -> None:
    """Each claim reads the ready jobs between its cursor and its next one
    (SPEC §24): on the index in the walk's order, bounded on both sides, in
    the custom and the generic plan. Another ready index (by queue, lane or
    key) has the bounds only as a filter and reads every ready job on each
    claim, which is what the generic plan chose once dependencies (SPEC §20)
    put `waiting = 0` in every ready index's predicate."""
    for text in (plan(big, sql(name), params, pinned=True), generic_plan(big, name, params)):
        walk = passed_walk(text)
        assert [n.get("Index Name") for n in walk] == [index], walk
        assert "< ROW(" in walk[0]["Index Cond"] and "> ROW(" in walk[0]["Index Cond"], walk


def test_the_fair_claims_short_form_reads_the_key_index_in_its_order(big: str) -> None:
    """claim_dense_jobs.sql (SPEC §23, decision 0034) reads the keys' heads
    in one pass of jobs_ready_key_idx, stopped by its LIMIT: its generic
    plan must take that index in its own order (no sort of what it reads,
    which would read the whole pass before the first head) and scan no
    table."""
    text = generic_plan(big, "claim_dense_jobs", {**CLAIM, "key_after": '{"~": ["0"]}'})
    found = scans(text)
    assert ("Index Scan", "jobs_ready_key_idx") in found, found
    assert not seq_scanned(text, "jobs"), found
    assert not any(n["Node Type"] == "Sort" and "jobs_ready_key_idx" in json.dumps(n)
                   for n in nodes(text)), text
