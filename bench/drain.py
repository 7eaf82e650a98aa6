"""drain and limit (SPEC §14): no-op jobs drained by one `awc tick` process,
against the same database's ceiling for the same work.

    python -m bench.drain [--jobs 20000] [--concurrency 256] [--runs 3]

drain: N pre-enqueued no-op jobs, one real `awc tick` process (events on,
to /dev/null), jobs/s from the first claim to the last completion as the
database recorded them; every job must end COMPLETED with one attempt.

limit: a raw psycopg loop with no engine around it — in each transaction,
record the previous batch with the fenced complete statement and claim the
next with the claim statement (awc's own statements and plan pins), one
round trip per batch of the same size. The ratio drain/limit is what the
engine costs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from typing import Any

from bench.common import (
    ROOT,
    bench_url,
    enqueue_noops,
    machine,
    median,
    report,
    reset,
    site_env,
)
from tick.db import connect
from tick.queue import ClaimRequest, Writes, round_trip


def limit(url: str, jobs: int, batch: int) -> float:
    """The raw loop's jobs/s."""
    with connect(url) as conn:
        reset(conn)
        enqueue_noops(conn, jobs)
        slots = [f"raw-{n}" for n in range(batch)]
        claim = ClaimRequest(slots, 300.0, 300.0, "{}", None, None)
        done, previous = 0, []
        began = time.perf_counter()
        while True:
            writes = Writes()
            writes.complete.extend((row.id, row.token, None) for row in previous)
            result = round_trip(conn, writes, claim)
            done += len(result.recorded)
            previous = result.claimed
            if not previous:
                break
        took = time.perf_counter() - began
        assert done == jobs, (done, jobs)
        return jobs / took


def drain(url: str, jobs: int, concurrency: int) -> float:
    """One `awc tick` process's jobs/s over `jobs` fresh no-op jobs."""
    with connect(url) as conn:
        reset(conn)
        enqueue_noops(conn, jobs)
    return drain_prepared(url, jobs, concurrency)


def drain_prepared(url: str, jobs: int, concurrency: int, first_id: int = 1,
                   awc_path: str | None = None, processes: int = 1,
                   awc: list[str] | None = None) -> float:
    """Run `processes` `awc tick` processes together over the ready jobs
    already enqueued and return their jobs/s from the database: from the
    first claim to the last completion of the jobs with ids from `first_id`.
    `awc_path` puts another installation of awc first (bench.limits: the
    one before); `awc` is the command that runs awc's CLI (bench.tracing:
    one that sets up tracing first)."""
    env = site_env(awc_path, {k: v for k, v in os.environ.items() if not k.startswith("AWC_")})
    env.update(DATABASE_URL=url, AWC_CAS_URL="memory://", AWC_HANDLER_MODULES="bench.kinds",
               AWC_TICK_MAX_SECS="600")
    ticks = [subprocess.Popen(
        [*(awc or [sys.executable, "-m", "tick.cli"]), "tick", "--max-jobs", str(jobs),
         "--concurrency", str(concurrency), "--json"],
        env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    ) for _ in range(processes)]
    codes = [tick.wait(timeout=900) for tick in ticks]
    if any(codes):
        raise SystemExit(f"awc tick failed with exits {codes}")
    with connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE state = 'COMPLETED' AND attempts = 1), "
            "count(*) FILTER (WHERE attempts > 1 OR state = 'RUNNING'), "
            "extract(epoch FROM max(finished_at) - min(started_at)) "
            "FROM awc.jobs WHERE id >= %s AND started_at IS NOT NULL", (first_id,)).fetchone()
    assert row is not None
    completed, twice, seconds = int(row[0]), int(row[1]), float(row[2])
    if completed != jobs or twice:
        raise SystemExit(f"verification failed: {completed} of {jobs} jobs completed once, "
                         f"{twice} ran more than once or are still running")
    return jobs / seconds


def drain_fresh(url: str, jobs: int, concurrency: int, site: str | None = None,
                kind: str = "noop") -> float:
    """An empty queue, `jobs` jobs of `kind` enqueued, then drained by the
    awc installed at `site` (None: this checkout): its jobs/s. The jobs are
    enqueued by that same awc: an older one's schema lacks columns this
    checkout's enqueue writes."""
    with connect(url) as conn:
        reset(conn)
        if site is None:
            enqueue_noops(conn, jobs, kind=kind)
    if site is not None:
        subprocess.run([sys.executable, "-c", ENQUEUE_AT_SITE, url, str(jobs), kind],
                       env=site_env(site, {"PATH": "/usr/bin:/bin"}), check=True)
    return drain_prepared(url, jobs, concurrency, awc_path=site)


# bench.common.enqueue_noops, as a script for another installation's producer.
ENQUEUE_AT_SITE = """import sys
from tick.db import connect
from tick.producer import enqueue_many
url, n, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with connect(url) as conn:
    for start in range(0, n, 10_000):
        enqueue_many(conn, [{"kind": kind}] * min(10_000, n - start))
"""


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    url = bench_url()
    drains, limits = [], []
    for _ in range(args.runs):
        limits.append(limit(url, args.jobs, args.concurrency))
        drains.append(drain(url, args.jobs, args.concurrency))
    figures = {
        "drain_jobs_per_s": round(median(drains)),
        "limit_jobs_per_s": round(median(limits)),
        "drain_over_limit": round(median(drains) / median(limits), 3),
        "drain_runs": [round(x) for x in drains],
        "limit_runs": [round(x) for x in limits],
    }
    with connect(url) as conn:
        context = {"machine": machine(conn), "driver": "awc tick (one process)",
                   "jobs": args.jobs, "concurrency": args.concurrency,
                   "batch": args.concurrency, "runs": args.runs,
                   "fencing": "on", "finished_jobs": "kept as COMPLETED rows"}
    report("drain", figures, context)
    return figures


if __name__ == "__main__":
    main()
