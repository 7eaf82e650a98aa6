"""fairness (SPEC §23, docs/decisions/0034): what the fair claim gives a
small key while a big one floods, and what keys cost a drain.

    python -m bench.fairness [--runs R] [--jobs N] [--keys K] [--flood F]
                             [--small S] [--rate PER_S] [--before REV]

Four measurements, interleaved round by round on one server (the embedded
PostgreSQL with initdb's defaults, autovacuum on, that bench.horizon
starts, unless --database-url names one), each reported as a median with
its runs:

- latency: one `awc loop` (`--concurrency` slots) runs; `--flood` jobs of a
  1 ms handler under key `big` are enqueued first, then `--small` jobs of
  key `small`, one per transaction at `--rate` a second. A small job's
  latency is its `started_at` less its `created_at` (database clock):
  p50 and p99, against the same stream with no flood, and against a flood
  and a stream that carry no key (first in, first out: what keys fix).
- keys: `--jobs` no-op jobs spread over `--keys` distinct keys, drained by
  one `awc tick`, against the same jobs with no key (target >= 0.9).
- no keys: `--jobs` no-op jobs without a key drained by this checkout,
  against awc at REV (by default the commit before
  migrations/0019_job_keys.sql was added), in a database that version
  migrated itself (target >= 0.97).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import (
    ROOT,
    before_url,
    bench_url,
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

BEFORE_DB = "awc_bench_before_keys"


def before_rev() -> str:
    """The commit before job keys landed."""
    return rev_before_adding("migrations/0019_job_keys.sql", "fairness")


def drain_keyed(url: str, jobs: int, keys: int, concurrency: int) -> float:
    """`jobs` no-op jobs over `keys` distinct keys (0: none), drained by one
    `awc tick`: its jobs/s."""
    with connect(url) as conn:
        reset(conn)
        for start in range(0, jobs, 10_000):
            enqueue_many(conn, [{"kind": "noop", "key": f"tenant-{n % keys}" if keys else None}
                                for n in range(start, min(jobs, start + 10_000))])
    return drain_prepared(url, jobs, concurrency)


def _loop(url: str, concurrency: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWC_")}
    env.update(DATABASE_URL=url, AWC_CAS_URL="memory://", AWC_HANDLER_MODULES="bench.kinds",
               PYTHONPATH=str(ROOT), AWC_WORKER_POLL_INTERVAL_MS="60000")
    return subprocess.Popen([sys.executable, "-m", "tick.cli", "loop", "--concurrency",
                             str(concurrency)], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def latency(url: str, flood: int, flood_key: str | None, small: int, rate: float,
            small_key: str | None, concurrency: int) -> dict[str, float]:
    """The small stream's latency (ms) with `flood` jobs ahead of it."""
    with connect(url) as conn:
        reset(conn)
        for start in range(0, flood, 10_000):
            enqueue_many(conn, [{"kind": "sleep1ms", "key": flood_key}]
                         * min(10_000, flood - start))
        first_small = flood + 1
    loop = _loop(url, concurrency)
    try:
        with connect(url) as conn:
            deadline = time.monotonic() + 30
            while conn.execute("SELECT count(*) FROM pg_stat_activity "
                               "WHERE query LIKE 'LISTEN%%'").fetchone() != (1,):
                if time.monotonic() > deadline:
                    raise SystemExit("the loop did not start listening")
                time.sleep(0.05)
            began = time.monotonic()
            for n in range(small):
                enqueue(conn, "noop", key=small_key)
                time.sleep(max(0.0, began + (n + 1) / rate - time.monotonic()))
            # What was left of the flood when the stream ended: > 0 means
            # the flood lasted the whole stream.
            row = conn.execute("SELECT count(*) FROM ONLY awc.jobs "
                               "WHERE id < %s AND state = 'PENDING'", (first_small,)).fetchone()
            left = int(row[0]) if row else 0
            deadline = time.monotonic() + 600
            while conn.execute("SELECT count(*) FROM awc.jobs WHERE id >= %s "
                               "AND state <> 'COMPLETED'", (first_small,)).fetchone() != (0,):
                if time.monotonic() > deadline:
                    raise SystemExit("the small jobs did not complete")
                time.sleep(0.05)
            row = conn.execute(
                "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY lat), "
                "percentile_cont(0.99) WITHIN GROUP (ORDER BY lat) FROM "
                "(SELECT extract(epoch FROM started_at - created_at) * 1000 AS lat "
                "FROM awc.jobs WHERE id >= %s) AS l", (first_small,)).fetchone()
            assert row is not None
    finally:
        loop.send_signal(signal.SIGTERM)
        try:
            loop.wait(120)
        except subprocess.TimeoutExpired:
            loop.kill()
            loop.wait()
    return {"p50_ms": float(row[0]), "p99_ms": float(row[1]), "flood_left": float(left)}


def _spread(values: list[float], digits: int = 0) -> dict[str, Any]:
    if not values:  # not run (--only)
        return {}
    return {"median": round(median(values), digits), "runs": [round(v, digits) for v in values]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--flood", type=int, default=40_000)
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--before", help="the commit to compare with")
    parser.add_argument("--database-url", help="a server to use instead of starting one")
    parser.add_argument("--only", choices=("before", "keys", "latency"),
                        help="run one of the three comparisons (a look, not the figure)")
    args = parser.parse_args(argv)
    parts = {args.only} if args.only else {"before", "keys", "latency"}
    rev = args.before or before_rev()
    got: dict[str, list[Any]] = {name: [] for name in (
        "before", "now", "keyed", "plain", "quiet", "flood", "fifo")}
    with cluster(args.database_url) as (admin, server), \
            tempfile.TemporaryDirectory(prefix="awc-before-") as scratch:
        url = bench_url(admin)
        site = install_before(rev, Path(scratch))
        old_url = before_url(site, BEFORE_DB, admin)
        for _ in range(args.runs):  # interleaved: the machine's noise falls on all
            if "before" in parts:
                got["before"].append(drain_fresh(old_url, args.jobs, args.concurrency, site))
                got["now"].append(drain_fresh(url, args.jobs, args.concurrency))
            if "keys" in parts:
                got["keyed"].append(drain_keyed(url, args.jobs, args.keys, args.concurrency))
                got["plain"].append(drain_keyed(url, args.jobs, 0, args.concurrency))
            if "latency" in parts:
                got["quiet"].append(latency(url, 0, None, args.small, args.rate, "small",
                                            args.concurrency))
                got["flood"].append(latency(url, args.flood, "big", args.small, args.rate,
                                            "small", args.concurrency))
                got["fifo"].append(latency(url, args.flood, None, args.small, args.rate, None,
                                           args.concurrency))
        with connect(url) as conn:
            context = {"machine": machine(conn), "server": server, "before_rev": rev,
                       "jobs": args.jobs, "keys": args.keys, "runs": args.runs,
                       "concurrency": args.concurrency, "flood": args.flood,
                       "small": args.small, "rate_per_s": args.rate,
                       "flood_handler": "sleep1ms", "driver": "awc loop / awc tick"}

    def lat(name: str, field: str) -> dict[str, Any]:
        return _spread([r[field] for r in got[name]], 1)

    def ratio(top: str, bottom: str) -> float:
        return round(median(got[top]) / median(got[bottom]), 3) if got[top] else 0.0

    figures = {
        "small_key_quiet_p50_ms": lat("quiet", "p50_ms"),
        "small_key_quiet_p99_ms": lat("quiet", "p99_ms"),
        "small_key_flooded_p50_ms": lat("flood", "p50_ms"),
        "small_key_flooded_p99_ms": lat("flood", "p99_ms"),
        "flood_left_when_stream_ended": lat("flood", "flood_left"),
        "no_keys_flooded_p50_ms": lat("fifo", "p50_ms"),
        "no_keys_flooded_p99_ms": lat("fifo", "p99_ms"),
        "drain_distinct_keys_jobs_per_s": _spread(got["keyed"]),
        "drain_no_keys_jobs_per_s": _spread(got["plain"]),
        "keys_over_no_keys": ratio("keyed", "plain"),
        # Each round's own ratio (its two drains ran back to back): the spread.
        "keys_over_no_keys_by_round": _spread(
            [k / p for k, p in zip(got["keyed"], got["plain"], strict=True)], 3),
        "keys_target": ">= 0.9",
        "now_no_keys_jobs_per_s": _spread(got["now"]),
        "before_keys_jobs_per_s": _spread(got["before"]),
        "now_over_before": ratio("now", "before"),
        "before_target": ">= 0.97",
    }
    report("fairness", figures, context)
    return figures


if __name__ == "__main__":
    main()
