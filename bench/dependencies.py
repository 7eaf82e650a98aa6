"""dependencies (SPEC §20, docs/decisions/0033): what dependencies cost.

    python -m bench.dependencies [--children N] [--runs R] [--before REV] [--no-before]
                                 [--database-url URL] [--only claim|before]

On a PostgreSQL of its own with initdb's defaults (autovacuum on), the one
bench.horizon starts, unless --database-url names a server.

* The claim with N children waiting (default 100,000, behind one parent that
  never runs) vs as many finished jobs instead: shared buffers the claim
  statement touches and its time, medians over R claims of 64 slots, on the
  same 1,000 ready jobs. Waiting children are in no ready index: the two
  must be about equal.
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
    fresh_database,
    install_before,
    machine,
    median,
    report,
    reset,
    rev_before_adding,
)
from bench.drain import drain_fresh
from bench.horizon import cluster
from tick.db import connect
from tick.producer import enqueue, enqueue_many
from tick.queue import NO_CURSOR, new_nonce
from tick.statements import sql

BEFORE_DB = "awc_bench_before_dependencies"
NOW_DB = "awc_bench_dependencies"  # its own: another checkout's awc_bench may be newer


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


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--children", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", help="the commit to compare with")
    parser.add_argument("--no-before", action="store_true", help="skip the comparison with REV")
    parser.add_argument("--database-url", help="a server to use instead of starting one")
    parser.add_argument("--only", choices=("claim", "before"),
                        help="run one comparison (a look, not the figure)")
    args = parser.parse_args(argv)
    with cluster(args.database_url) as (admin, server):
        figures, context = measure(args, admin)
        context["server"] = server
    report("dependencies", figures, context)
    return figures


def measure(args: argparse.Namespace, admin: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The figures of main(), on the server `admin` names."""
    parts = {args.only} if args.only else {"claim", "before"}
    url = fresh_database(admin, NOW_DB)
    figures: dict[str, Any] = {}
    context: dict[str, Any] = {"children": args.children, "runs": args.runs}
    if "claim" in parts:
        claim_figures(figures, url, args.children, args.runs)
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


if __name__ == "__main__":
    main()
