"""dependencies (SPEC §20, docs/decisions/0033): what dependencies cost.

    python -m bench.dependencies [--children N] [--graph N] [--chain N] [--runs R]
                                 [--before REV] [--no-before] [--database-url URL]
                                 [--only claim|graphs|before]

On a PostgreSQL of its own with initdb's defaults (autovacuum on), the one
bench.horizon starts, unless --database-url names a server.

* The claim with N children waiting (default 100,000, behind one parent that
  never runs) vs as many finished jobs instead: shared buffers the claim
  statement touches and its time, medians over R claims of 64 slots, on the
  same 1,000 ready jobs. Waiting children are in no ready index: the two
  must be about equal.
* Fan-in, N parents to one child (default 10,000), and fan-out, one parent
  to N children, drained by one `awc tick` process at concurrency 64, as
  jobs/s against N + 1 independent jobs in the same run (target >= 0.8);
  the fan-in's latency, from the last parent's completion to the child's
  start, in ms.
* A chain of 1,000 (each job after the one before), drained by one `awc
  tick` at concurrency 1, against as many independent jobs at concurrency 1
  (a chain can use one slot only).
* Independent jobs now vs awc at REV (default: the commit before
  migrations/0016_dependencies.sql), 20,000 no-op jobs drained by one `awc
  tick`, interleaved (target >= 0.97).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from bench.common import (
    before_url,
    enqueue_noops,
    install_before,
    machine,
    median,
    report,
    reset,
    rev_before_adding,
)
from bench.drain import drain_fresh, drain_prepared
from bench.horizon import cluster
from tick.db import connect
from tick.producer import enqueue, enqueue_many
from tick.queue import NO_CURSOR, new_nonce
from tick.statements import sql

BEFORE_DB = "awc_bench_before_dependencies"
NOW_DB = "awc_bench_dependencies"  # its own: another checkout's awc_bench may be newer


def own_url(admin: str) -> str:
    """A fresh database NOW_DB on `admin`'s server, migrated by this checkout."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    from tick.migrate import migrate

    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {NOW_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {NOW_DB}")
    url = make_conninfo(admin, dbname=NOW_DB)
    with connect(url) as conn:
        migrate(conn)
    return url


def claim_cost(url: str, children: int, runs: int, waiting: bool) -> tuple[float, float]:
    """Median (shared buffers, ms) of the claim statement over 1,000 ready
    jobs, with `children` jobs waiting behind a parent that never runs, or
    (not `waiting`) as many finished jobs: the same table, so the two differ
    only in whether those rows wait."""
    with connect(url) as conn:
        reset(conn)
        if not waiting:
            conn.execute("INSERT INTO awc.jobs (kind, state, finished_at) "
                         "SELECT 'noop', 'COMPLETED', now() FROM generate_series(0, %s)",
                         (children,))
        else:
            parent = enqueue(conn, "noop", run_at=None, priority=-1)
            conn.execute("UPDATE awc.jobs SET run_at = 'infinity' WHERE id = %s", (parent,))
            for start in range(0, children, 10_000):
                enqueue_many(conn, [{"kind": "noop", "after": [parent]}]
                             * min(10_000, children - start))
        enqueue_noops(conn, 1000)
        conn.execute("VACUUM ANALYZE awc.jobs")
        params = {**NO_CURSOR, "nonce": new_nonce(), "queue": None,
                  "slots": [f"s{n}" for n in range(64)],
                  "lease": 60.0, "cap": 60.0, "leases": "{}", "kinds": None, "queues": None}
        buffers, times = [], []
        for _ in range(runs):
            with conn.transaction(force_rollback=True):
                row = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql("claim_jobs"),
                                   params).fetchone()
            assert row is not None
            plan = row[0][0] if isinstance(row[0], list) else json.loads(row[0])[0]
            top = plan["Plan"]
            touched = top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0)
            buffers.append(float(touched))
            times.append(float(plan["Execution Time"]))
    return median(buffers), median(times)


def graph_jobs(shape: str, n: int) -> tuple[list[dict[str, Any]], int]:
    """The jobs of a fan-in (n parents, one child), a fan-out (one parent, n
    children), a chain of n, or n + 1 independent jobs; and how many."""
    jobs: list[dict[str, Any]]
    if shape == "fan_in":
        jobs = [{"kind": "noop"} for _ in range(n)]
        jobs.append({"kind": "noop", "after": [f"#{i}" for i in range(n)]})
    elif shape == "fan_out":
        jobs = [{"kind": "noop"}] + [{"kind": "noop", "after": ["#0"]} for _ in range(n)]
    elif shape == "chain":
        jobs = [{"kind": "noop"}] + [{"kind": "noop", "after": [f"#{i}"]} for i in range(n - 1)]
    else:
        jobs = [{"kind": "noop"} for _ in range(n + (0 if shape == "chain_alone" else 1))]
    return jobs, len(jobs)


def drain_graph(url: str, shape: str, n: int, concurrency: int) -> tuple[float, float | None]:
    """jobs/s draining the graph `shape` with one `awc tick`; for a fan-in,
    the ms from the last parent's completion to the child's start."""
    jobs, total = graph_jobs(shape, n)
    with connect(url) as conn:
        reset(conn)
        ids = enqueue_many(conn, jobs)
    rate = drain_prepared(url, total, concurrency)
    latency = None
    if shape == "fan_in":
        with connect(url) as conn:
            row = conn.execute(
                "SELECT extract(epoch FROM c.started_at - max(p.finished_at)) * 1000 "
                "FROM awc.jobs AS c, awc.jobs AS p WHERE c.id = %s AND p.id = ANY(%s) "
                "GROUP BY c.started_at", (ids[-1], ids[:-1])).fetchone()
        latency = None if row is None else float(row[0])
    return rate, latency


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--children", type=int, default=100_000)
    parser.add_argument("--graph", type=int, default=10_000)
    parser.add_argument("--chain", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", help="the commit to compare with")
    parser.add_argument("--no-before", action="store_true", help="skip the comparison with REV")
    parser.add_argument("--database-url", help="a server to use instead of starting one")
    parser.add_argument("--only", choices=("claim", "graphs", "before"),
                        help="run one comparison (a look, not the figure)")
    args = parser.parse_args(argv)
    with cluster(args.database_url) as (admin, server):
        figures, context = measure(args, admin)
        context["server"] = server
    report("dependencies", figures, context)
    return figures


def measure(args: argparse.Namespace, admin: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The figures of main(), on the server `admin` names."""
    parts = {args.only} if args.only else {"claim", "graphs", "before"}
    url = own_url(admin)
    figures: dict[str, Any] = {}
    context: dict[str, Any] = {"children": args.children, "graph": args.graph,
                               "chain": args.chain, "runs": args.runs}
    if "claim" in parts:
        claim_figures(figures, url, args.children, args.runs)
    if "graphs" in parts:
        graph_figures(figures, url, args.graph, args.chain, args.runs)
    if "before" in parts and not args.no_before:
        rev = args.before or rev_before_adding("migrations/0016_dependencies.sql",
                                               "dependencies")
        with tempfile.TemporaryDirectory(prefix="awc-before-") as scratch:
            site = install_before(rev, Path(scratch))
            old_url = before_url(site, BEFORE_DB, admin)
            before, now = [], []
            for _ in range(args.runs):  # interleaved: the machine's noise falls on both
                before.append(drain_fresh(old_url, args.jobs, 256, site))
                now.append(drain_fresh(url, args.jobs, 256))
        figures.update(independent_before_jobs_per_s=round(median(before)),
                       independent_now_jobs_per_s=round(median(now)),
                       independent_now_over_before=round(median(now) / median(before), 3),
                       independent_ratio_runs=[round(n / b, 3)
                                               for n, b in zip(now, before, strict=True)])
        context.update(before_rev=rev, jobs=args.jobs)
    with connect(url) as conn:
        context["machine"] = machine(conn)
    return figures, context


def claim_figures(figures: dict[str, Any], url: str, children: int, runs: int) -> None:
    none_buf, none_ms = claim_cost(url, children, max(runs, 5), waiting=False)
    many_buf, many_ms = claim_cost(url, children, max(runs, 5), waiting=True)
    figures.update(claim_buffers_no_waiting=none_buf, claim_buffers_with_waiting=many_buf,
                   claim_ms_no_waiting=round(none_ms, 3), claim_ms_with_waiting=round(many_ms, 3),
                   claim_buffers_ratio=round(many_buf / none_buf, 3) if none_buf else None)


def graph_figures(figures: dict[str, Any], url: str, size: int, chain: int, runs: int) -> None:
    for shape, n, slots in (("fan_in", size, 64), ("fan_out", size, 64), ("chain", chain, 1)):
        graph, alone, latencies = [], [], []
        for _ in range(runs):
            rate, latency = drain_graph(url, shape, n, slots)
            graph.append(rate)
            if latency is not None:
                latencies.append(latency)
            alone.append(drain_graph(url, "chain_alone" if shape == "chain" else "alone",
                                     n, slots)[0])
        figures[f"{shape}_jobs_per_s"] = round(median(graph))
        figures[f"{shape}_independent_jobs_per_s"] = round(median(alone))
        figures[f"{shape}_ratio"] = round(median(graph) / median(alone), 3)
        # The spread: each round's graph over the independent jobs beside it.
        figures[f"{shape}_ratio_runs"] = [round(g / a, 3)
                                          for g, a in zip(graph, alone, strict=True)]
        if latencies:
            figures[f"{shape}_latency_ms"] = round(median(latencies), 2)


if __name__ == "__main__":
    main()
