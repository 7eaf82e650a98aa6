"""limits (SPEC §18): what global limits cost the claim.

    python -m bench.limits [--jobs 20000] [--concurrency 256] [--runs 3]
                           [--before REV]

Drains of N no-op jobs by one `awc tick` process, interleaved, in the same
run: awc as it was before limits (REV, by default the commit before
migrations/0006_limits.sql, laid out apart from this checkout and draining
its own database); awc now with no limit rows; with 10 limit rows on other
kinds and queues (none binds); and with the drained kind's own max_running
far above what runs, plus 9 more (every job then goes through the limited
claim). Jobs/s of each and the ratios now/before (target ≥ 0.97) and with
limits/without (target ≥ 0.9). Then a cold empty `awc tick` with the 10
limits on other kinds and without any, interleaved (target ≥ 0.95).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import psycopg

from bench.common import (
    before_url,
    bench_url,
    enqueue_noops,
    install_before,
    machine,
    median,
    report,
    reset,
    rev_before_adding,
    server_url,
)
from bench.drain import drain_fresh, drain_prepared
from bench.empty_tick import env_for, once
from tick.db import connect

BEFORE_DB = "awc_bench_before"

def before_rev() -> str:
    """The commit before global limits landed."""
    return rev_before_adding("migrations/0006_limits.sql", "limits")


def one(url: str, jobs: int, concurrency: int, limits: str, site: str | None = None) -> float:
    """jobs/s of one drain with `limits`: "none"; "other" (10 limits on other
    kinds and queues); "own" (the drained kind's own max_running, far above
    what runs, and 9 more). With `site` (an older awc), "none" only, enqueued
    by that awc: its schema lacks columns this checkout's enqueue writes."""
    if site is not None:
        return drain_fresh(url, jobs, concurrency, site)
    with connect(url) as conn:
        reset(conn)
        conn.execute("DELETE FROM awc.limits")
        if limits == "own":
            conn.execute("INSERT INTO awc.limits (scope, name, max_running) "
                         "VALUES ('kind', 'noop', 1000000)")
        if limits != "none":
            _add_limits(conn, 9 if limits == "own" else 10)
        enqueue_noops(conn, jobs)
    return drain_prepared(url, jobs, concurrency)


def _add_limits(conn: psycopg.Connection[Any], n: int) -> None:
    """`n` limits on other kinds and queues, none of which binds."""
    conn.execute("INSERT INTO awc.limits (scope, name, max_running, rate, per_secs) "
                 "SELECT CASE WHEN n %% 2 = 0 THEN 'kind' ELSE 'queue' END, "
                 "'other-' || n, 5, 100, 60 FROM generate_series(1, %s) AS n", (n,))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", help="the commit to compare with")
    args = parser.parse_args(argv)
    url = bench_url()
    rev = args.before or before_rev()
    with tempfile.TemporaryDirectory(prefix="awc-before-") as scratch:
        site = install_before(rev, Path(scratch))
        old_url = before_url(site, BEFORE_DB)
        before, none, other, own = [], [], [], []
        for _ in range(args.runs):  # interleaved: the machine's noise falls on all
            before.append(one(old_url, args.jobs, args.concurrency, "none", site))
            none.append(one(url, args.jobs, args.concurrency, "none"))
            other.append(one(url, args.jobs, args.concurrency, "other"))
            own.append(one(url, args.jobs, args.concurrency, "own"))
    with psycopg.connect(server_url(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BEFORE_DB}")
    figures = {
        "before_jobs_per_s": round(median(before)),
        "no_limits_jobs_per_s": round(median(none)),
        "ten_other_limits_jobs_per_s": round(median(other)),
        "own_limit_jobs_per_s": round(median(own)),
        "no_limits_over_before": round(median(none) / median(before), 3),
        "ten_other_limits_over_no_limits": round(median(other) / median(none), 3),
        "own_limit_over_no_limits": round(median(own) / median(none), 3),
    }
    empty_with, empty_without = [], []
    env = env_for(url)
    for _ in range(args.runs * 2):
        with connect(url) as conn:
            reset(conn)
            conn.execute("DELETE FROM awc.limits")
        empty_without.append(once(env))
        with connect(url) as conn:
            _add_limits(conn, 10)
        empty_with.append(once(env))
    figures.update({
        "empty_tick_ten_limits_s": round(median(empty_with), 3),
        "empty_tick_no_limits_s": round(median(empty_without), 3),
        "empty_tick_no_limits_over_ten": round(median(empty_without) / median(empty_with), 3),
    })
    with connect(url) as conn:
        conn.execute("DELETE FROM awc.limits")
        report("limits", figures, {"machine": machine(conn), "driver": "awc tick (one process)",
                                   "jobs": args.jobs, "concurrency": args.concurrency,
                                   "runs": args.runs, "before": rev})
    return figures


if __name__ == "__main__":
    main()
