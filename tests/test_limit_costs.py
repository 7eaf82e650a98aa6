"""What a held-back backlog costs (SPEC §18, §19): nothing to other work.

A limit that is paused, saturated, held by another claimer or out of room
keeps its jobs PENDING; the claim of every other job, in every claim lane,
reads no more than it would without them, and the Limits page counts what
it shows ("10,000+"), whatever the backlog. Measured as rows the plans read
from awc.jobs (EXPLAIN ANALYZE), which a slower machine does not change."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.support import migrated_database, nodes, seq_scanned
from tick.queue import NO_CURSOR, new_nonce
from tick.statements import sql
from tick.ui.reads import CAP

pytestmark = pytest.mark.timeout(300)

BACKLOG = 60_000  # ready jobs of kind "held" in queue "hq", older and of higher priority
SLOTS = 64


@pytest.fixture(scope="module")
def backlog(server_url: str, template_db: str) -> Iterator[str]:
    """A deep held-back candidate, and 600 other ready jobs in two queues
    behind it in claim order."""
    with migrated_database(server_url, template_db) as url, \
            psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO awc.jobs (kind, queue, priority, run_at) "
                     "SELECT 'held', 'hq', 5, now() - interval '2 hours' "
                     "FROM generate_series(1, %s)", (BACKLOG,))
        conn.execute("INSERT INTO awc.jobs (kind, queue, priority, run_at) "
                     "SELECT 'noop', CASE WHEN n % 2 = 0 THEN 'default' ELSE 'q2' END, 0, "
                     "now() - interval '1 hour' FROM generate_series(1, 600) AS n")
        conn.execute("VACUUM ANALYZE awc.jobs")
        yield url


def read_from_jobs(plan: Any) -> int:
    """Rows the plan's scans of awc.jobs examined (returned or filtered out)."""
    return sum((int(n.get("Actual Rows", 0)) + int(n.get("Rows Removed by Filter", 0)))
               * int(n.get("Actual Loops", 1))
               for n in nodes(json.dumps(plan))
               if n.get("Relation Name") == "jobs" and n["Node Type"] != "ModifyTable")


# How the backlog is held back: the limits, and what else holds them.
HOLDS = {
    "paused-kind": [("kind", "held", 0, None)],
    "paused-queue": [("queue", "hq", 0, None)],
    "kind-at-max-running": [("kind", "held", 1, None)],  # one held job RUNNING
    "queue-at-its-rate": [("queue", "hq", None, 1)],  # one claim in the window
    "kind-held-by-another-claimer": [("kind", "held", 1000, None)],
    "kind-with-room-for-5": [("kind", "held", 5, None)],
    "paused-kind-and-a-queue-limit": [("kind", "held", 0, None), ("queue", "q2", 1000, 1000)],
}
# Limits that cannot bind in a claim of SLOTS jobs (room for every slot).
NEVER_BINDING = {
    "its-own-kind": [("kind", "held", 1000, None)],
    "its-own-queue": [("queue", "hq", 1000, None)],
    "another-kind": [("kind", "noop", 1000, None)],
    "kind-and-queue": [("kind", "held", 1000, None), ("queue", "q2", 1000, None)],
}
LANES = {
    "all": {"kinds": None, "queues": None, "queue": None},
    "kinds": {"kinds": ["held", "noop"], "queues": None, "queue": None},
    "queues": {"kinds": None, "queues": ["hq", "default"], "queue": None},
    "queue": {"kinds": None, "queues": ["hq"], "queue": "hq"},
}


def claim_plans(url: str, hold: str, lane: str) -> tuple[list[Any], list[str]]:
    """The plans of the claim's three statements (SPEC §18, decision 0012)
    under `hold`, and the kinds the same claim takes, in one transaction
    each, rolled back."""
    params = {"slots": [f"w-{n}" for n in range(SLOTS)], "lease": 300.0, "cap": 300.0,
              "leases": "{}", "nonce": new_nonce(), **NO_CURSOR, **LANES[lane]}
    name = "claim_jobs_in_queue" if params["queue"] else "claim_jobs"
    other = None
    if hold == "kind-held-by-another-claimer":  # committed, and locked by another claimer
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("INSERT INTO awc.limits (scope, name, max_running) "
                         "VALUES ('kind', 'held', 1000)")
        other = psycopg.connect(url)
        other.execute("SELECT 1 FROM awc.limits FOR UPDATE")
    try:
        plans: list[Any] = []
        kinds: list[str] = []
        for explain in (True, False):
            with psycopg.connect(url) as conn:
                if other is None:
                    for scope, target, most, rate in {**HOLDS, **NEVER_BINDING}[hold]:
                        conn.execute(
                            "INSERT INTO awc.limits (scope, name, max_running, rate, per_secs) "
                            "VALUES (%s, %s, %s, %s, %s)",
                            (scope, target, most, rate, None if rate is None else 3600))
                        if rate is not None:
                            conn.execute("INSERT INTO awc.limit_claims (scope, name, at) "
                                         "VALUES (%s, %s, now())", (scope, target))
                if hold == "kind-at-max-running":
                    conn.execute("UPDATE awc.jobs SET state = 'RUNNING', claim_token = "
                                 "gen_random_uuid(), locked_until = now() + interval '1 hour' "
                                 "WHERE id = (SELECT min(id) FROM awc.jobs)")
                conn.execute(sql("pin_plans"))
                conn.execute(sql("claim_limits"), params)
                for statement in ("claim_limited_jobs", name):
                    if explain:
                        row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql(statement),
                                           params).fetchone()
                        assert row is not None
                        plans.append(row[0])
                    else:
                        kinds += [r[1] for r in conn.execute(sql(statement), params)
                                  if r[0] is not None]
                conn.rollback()
        return plans, kinds
    finally:
        if other is not None:
            other.close()
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("DELETE FROM awc.limits")


@pytest.mark.parametrize("lane", sorted(LANES))
@pytest.mark.parametrize("hold", sorted(HOLDS))
def test_a_held_back_backlog_costs_the_claim_of_other_work_nothing(
    backlog: str, hold: str, lane: str
) -> None:
    """SPEC §18: held-back jobs cost other work nothing. 60,000 ready jobs
    ahead of the others in claim order, held back by a limit, add nothing
    the claim reads: the first jobs of each lane it opens, what it claims
    (read again under lock, then updated), a probe per lane, and a look at
    what each limited lane still has (before: the whole backlog, 170 ms a
    claim at 1M)."""
    plans, kinds = claim_plans(backlog, hold, lane)
    read = sum(read_from_jobs(plan) for plan in plans)
    assert read <= 6 * SLOTS + 50, (read, [json.dumps(p) for p in plans])
    for plan in plans:
        assert not seq_scanned(json.dumps(plan), "jobs")
    if lane == "queue":  # only the held lane: nothing, or what the limit's room lets through
        assert kinds == (["held"] * 5 if hold == "kind-with-room-for-5" else [])
    else:
        # The limit's room first (higher priority), then the others: every slot filled.
        assert kinds == (["held"] * 5 if hold == "kind-with-room-for-5" else []) \
            + ["noop"] * (SLOTS - (5 if hold == "kind-with-room-for-5" else 0))


@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_the_limits_page_counts_what_it_shows_whatever_the_backlog(
    backlog: str, generic: bool
) -> None:
    """SPEC §19: the Limits page's counts stop at its "10,000+", and each
    limit's count reads its own kind's or queue's jobs by index: with several
    limits saturated over a deep backlog, the page reads about one cap per
    limit (before: up to 100,000 each, through one filter for them all)."""
    with psycopg.connect(backlog) as conn:
        conn.execute("SET jit = off")  # as the console's connections run (operator_session)
        if generic:
            conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute("INSERT INTO awc.limits (scope, name, max_running, rate, per_secs) VALUES "
                     "('kind', 'held', 0, NULL, NULL), ('queue', 'hq', 0, NULL, NULL), "
                     "('kind', 'noop', NULL, 1, 3600), ('queue', 'q2', 0, NULL, NULL), "
                     # a key's count by its range at each priority: it read
                     # every ready job (the key index leads with the priority)
                     "('key', 'acme', 0, NULL, NULL)")
        conn.execute("INSERT INTO awc.limit_claims (scope, name, at) "
                     "VALUES ('kind', 'noop', now())")
        row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql("list_limits"),
                           {"cap": CAP + 1, "busiest": 20}).fetchone()
        assert row is not None
        from tick.ui.reads import limits

        shown = {(r["scope"], r["name"]): r["held_back"] for r in limits(conn)}
        conn.rollback()
    assert not seq_scanned(json.dumps(row[0]), "jobs")
    read = read_from_jobs(row[0])
    # held (capped), hq (capped), noop's 600, q2's 300; and the RUNNING counts.
    assert read <= 2 * (CAP + 1) + 600 + 300 + 5 * 10, read
    assert shown == {("kind", "held"): CAP + 1, ("queue", "hq"): CAP + 1,
                     ("kind", "noop"): 600, ("queue", "q2"): 300, ("key", "acme"): 0}


@pytest.mark.parametrize("lane", sorted(LANES))
@pytest.mark.parametrize("limits", sorted(NEVER_BINDING))
def test_a_limit_that_cannot_bind_leaves_the_claim_its_one_ordered_walk(
    backlog: str, limits: str, lane: str
) -> None:
    """SPEC §18: a limit costs nothing while it cannot bind: each limit the
    claim reaches has room for every slot, so the claim is the usual ordered
    walk (no lane is read), in priority order: the backlog's jobs first.
    The walk's batch is read three times (taken; then, from the cursor, the
    first job left ready and the jobs due later it passed: SPEC §24), never
    the backlog behind it."""
    plans, kinds = claim_plans(backlog, limits, lane)
    read = sum(read_from_jobs(plan) for plan in plans)
    assert read <= 3 * SLOTS + 20, (read, [json.dumps(p) for p in plans])
    assert kinds == ["held"] * SLOTS


def test_a_key_limit_s_held_back_count_reads_that_key_only(backlog: str) -> None:
    """A saturated `key:NAME` counts the key's ready jobs at each priority
    in jobs_ready_key_idx, which leads with the priority: by the key alone
    it read the whole index before PostgreSQL 18's skip scan (10 such limits
    over 500,000 ready jobs: 1.2 s for the Limits page on PostgreSQL 15;
    305 buffers here, against 21, with DATABASE_URL naming a PostgreSQL 15)."""
    with psycopg.connect(backlog) as conn:
        conn.execute("SET jit = off")
        conn.execute("INSERT INTO awc.limits (scope, name, max_running) VALUES ('key', 'acme', 0)")
        conn.execute("INSERT INTO awc.jobs (kind, key) SELECT 'noop', 'acme' "
                     "FROM generate_series(1, 3)")
        row = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql("list_limits"),
                           {"cap": CAP + 1, "busiest": 20}).fetchone()
        assert row is not None
        from tick.limits import list_limits

        (listed,) = list_limits(conn)
        conn.rollback()
    assert listed["held_back"] == 3
    touched = sum(int(n.get("Shared Hit Blocks", 0)) + int(n.get("Shared Read Blocks", 0))
                  for n in nodes(json.dumps(row[0]))
                  if n.get("Relation Name") == "jobs" and "Scan" in n["Node Type"])
    assert touched < 60, touched  # a few probes; the whole index is hundreds of pages


def test_a_limit_on_a_kind_or_queue_with_no_job_costs_the_claim_a_probe(
    server_url: str, template_db: str
) -> None:
    """SPEC §18: a limit that cannot bind costs nothing. Where every job is
    of one kind in one queue (the statistics then say any name matches every
    job), ten limits on other kinds and queues cost the claim's limit step a
    probe of an index each: it read the whole lane index for each queue
    limit, by its second column (a drain at 0.82 of none on PostgreSQL 15;
    610 buffers against 10 here, with DATABASE_URL naming a PostgreSQL 15)."""
    params = {"slots": [f"w-{n}" for n in range(SLOTS)], "lease": 300.0, "cap": 300.0,
              "leases": "{}", "nonce": new_nonce(), **NO_CURSOR, **LANES["all"]}
    with migrated_database(server_url, template_db) as url, \
            psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO awc.jobs (kind) SELECT 'noop' FROM generate_series(1, 20000)")
        conn.execute("VACUUM ANALYZE awc.jobs")
        conn.execute("INSERT INTO awc.limits (scope, name, max_running, rate, per_secs) "
                     "SELECT CASE WHEN n % 2 = 0 THEN 'kind' ELSE 'queue' END, "
                     "'other-' || n, 5, 100, 60 FROM generate_series(1, 10) AS n")
        with conn.transaction():
            conn.execute(sql("pin_plans"))
            conn.execute(sql("claim_limits"), params)
            row = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "
                               + sql("claim_limited_jobs"), params).fetchone()
            assert row is not None
            taken = [r for r in conn.execute(sql("claim_jobs"), params) if r[0] is not None]
            raise psycopg.Rollback()
    touched = sum(int(n.get("Shared Hit Blocks", 0)) + int(n.get("Shared Read Blocks", 0))
                  for n in nodes(json.dumps(row[0]))
                  if n.get("Relation Name") == "jobs" and "Scan" in n["Node Type"])
    assert touched < 60, touched
    assert len(taken) == SLOTS  # the usual walk claims, as with no limit at all
