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
- limited: the same two drains while a kind limit binds (another kind
  paused, one of its jobs ready): every claim is then the lane claim, which
  takes each lane's jobs round-robin across keys; keys against no keys
  there, and no keys under the limit against no keys without one. With
  `--limited-before REV`, the two drains under the limit also by awc at
  REV in a database it migrated, interleaved: now against then.
- no keys: `--jobs` no-op jobs without a key drained by this checkout,
  against awc at REV (by default the commit before
  migrations/0019_job_keys.sql was added), in a database that version
  migrated itself (target >= 0.97).
- horizon (only with `--only horizon`: a look at a known cost, decision
  0034's Consequences): `--horizon-slices` x `--horizon-slice-jobs` no-op
  jobs over `--horizon-keys` keys, and the same without keys, each drained
  slice by slice (one `awc tick` of `--horizon-slice-jobs` each) with the
  horizon pinned from before the enqueue (bench.horizon's holder) and free,
  four databases, slices interleaved: each slice's jobs/s.
"""

from __future__ import annotations

import argparse
import json
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
from bench.horizon import cluster, nothing_pinned, pinned_horizon
from tick.db import connect
from tick.producer import enqueue, enqueue_many

BEFORE_DB = "awc_bench_before_keys"


def before_rev() -> str:
    """The commit before job keys landed."""
    return rev_before_adding("migrations/0019_job_keys.sql", "fairness")


def drain_keyed(url: str, jobs: int, keys: int, concurrency: int,
                limited: bool = False, site: str | None = None) -> float:
    """`jobs` no-op jobs over `keys` distinct keys (0: none), drained by one
    `awc tick`: its jobs/s. `limited`: while a limit binds (a paused kind
    with a ready job), so every claim is the lane claim (SPEC §18), which
    then takes each lane's jobs round-robin across keys. `site`: drained by
    the awc installed there (bench.common.install_before; its schema must
    take this checkout's enqueue)."""
    with connect(url) as conn:
        reset(conn)
        conn.execute("DELETE FROM awc.limits")
        for start in range(0, jobs, 10_000):
            enqueue_many(conn, [{"kind": "noop", "key": f"tenant-{n % keys}" if keys else None}
                                for n in range(start, min(jobs, start + 10_000))])
        if limited:  # after the drained jobs' ids; never started
            enqueue(conn, "held")
            conn.execute("INSERT INTO awc.limits (scope, name, max_running) "
                         "VALUES ('kind', 'held', 0)")
    try:
        return drain_prepared(url, jobs, concurrency, awc_path=site)
    finally:
        with connect(url) as conn:
            conn.execute("DELETE FROM awc.limits")


def tick_rate(url: str, jobs: int, concurrency: int) -> float:
    """One `awc tick` of at most `jobs` jobs: its jobs/s by its own report."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWC_")}
    env.update(DATABASE_URL=url, AWC_CAS_URL="memory://", AWC_HANDLER_MODULES="bench.kinds",
               PYTHONPATH=str(ROOT), AWC_TICK_MAX_SECS="600")
    done = subprocess.run([sys.executable, "-m", "tick.cli", "tick", "--max-jobs", str(jobs),
                           "--concurrency", str(concurrency), "--json"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=900, check=True)
    report_ = json.loads(done.stdout)
    if report_["completed"] != jobs:
        raise SystemExit(f"a slice completed {report_['completed']} of {jobs} jobs")
    return float(report_["completed"]) / float(report_["duration_s"])


def horizon(admin: str, slices: int, slice_jobs: int, keys: int,
            concurrency: int) -> dict[str, list[float]]:
    """Each side's jobs/s per slice: keyed or not, pinned or free."""
    sides = {f"{k}_{p}": (bench_url(admin, f"awc_bench_fair_{k}_{p}"), k == "keys", p == "pinned")
             for k in ("keys", "plain") for p in ("pinned", "free")}
    holders = {}
    for name, (url, keyed, pinned) in sides.items():
        with connect(url) as conn:
            reset(conn)
        holders[name] = pinned_horizon(url) if pinned else nothing_pinned()
        holders[name].__enter__()
        with connect(url) as conn:
            for start in range(0, slices * slice_jobs, 10_000):
                enqueue_many(conn, [{"kind": "noop", "key": f"tenant-{n % keys}" if keyed
                                     else None}
                                    for n in range(start, min(slices * slice_jobs,
                                                              start + 10_000))])
            conn.execute("ANALYZE awc.jobs")
    rates: dict[str, list[float]] = {name: [] for name in sides}
    try:
        for k in range(slices):  # interleaved, the order turning each slice
            names = list(sides)
            for name in names[k % len(names):] + names[:k % len(names)]:
                rates[name].append(tick_rate(sides[name][0], slice_jobs, concurrency))
            print(f"  slice {k + 1}/{slices}: "
                  + ", ".join(f"{n} {r[-1]:.0f}" for n, r in rates.items()), flush=True)
    finally:
        for holder in holders.values():
            holder.__exit__(None, None, None)
        for url, _, _ in sides.values():
            with connect(url) as conn:
                reset(conn)
    return rates


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
    parser.add_argument("--limited-before", help="the commit to compare the limited drains with")
    parser.add_argument("--database-url", help="a server to use instead of starting one")
    parser.add_argument("--only", choices=("before", "keys", "limited", "latency", "horizon"),
                        help="run one comparison (a look, not the figure)")
    parser.add_argument("--horizon-slices", type=int, default=6)
    parser.add_argument("--horizon-slice-jobs", type=int, default=8_000)
    parser.add_argument("--horizon-keys", type=int, default=10)
    args = parser.parse_args(argv)
    if args.only == "horizon":
        with cluster(args.database_url) as (admin, server):
            rates = horizon(admin, args.horizon_slices, args.horizon_slice_jobs,
                            args.horizon_keys, args.concurrency)
            with connect(bench_url(admin)) as conn:
                context = {"machine": machine(conn), "server": server,
                           "slices": args.horizon_slices,
                           "slice_jobs": args.horizon_slice_jobs, "keys": args.horizon_keys,
                           "concurrency": args.concurrency, "driver": "awc tick per slice",
                           "holder": "bench.horizon's: REPEATABLE READ, from before the enqueue"}
        figures: dict[str, Any] = {f"{name}_jobs_per_s": [round(r) for r in got]
                                   for name, got in rates.items()}
        for side in ("keys", "plain"):
            figures[f"{side}_pinned_over_free"] = [
                round(p / f, 3) for p, f in zip(rates[f"{side}_pinned"], rates[f"{side}_free"],
                                                strict=True)]
        report("fairness_horizon", figures, context)
        return figures
    parts = {args.only} if args.only else {"before", "keys", "limited", "latency"}
    rev = args.before or before_rev()
    got: dict[str, list[Any]] = {name: [] for name in (
        "before", "now", "keyed", "plain", "keyed_limited", "plain_limited", "quiet",
        "flood", "fifo", "keyed_limited_then", "plain_limited_then")}
    with cluster(args.database_url) as (admin, server), \
            tempfile.TemporaryDirectory(prefix="awc-before-") as scratch:
        url = bench_url(admin)
        site = install_before(rev, Path(scratch)) if "before" in parts else None
        old_url = before_url(site, BEFORE_DB, admin) if site is not None else ""
        then = (install_before(args.limited_before, Path(scratch) / "limited")
                if args.limited_before and "limited" in parts else None)
        then_url = before_url(then, "awc_bench_limited_before", admin) if then else ""
        for _ in range(args.runs):  # interleaved: the machine's noise falls on all
            if "before" in parts:
                got["before"].append(drain_fresh(old_url, args.jobs, args.concurrency, site))
                got["now"].append(drain_fresh(url, args.jobs, args.concurrency))
            if "keys" in parts:
                got["keyed"].append(drain_keyed(url, args.jobs, args.keys, args.concurrency))
                got["plain"].append(drain_keyed(url, args.jobs, 0, args.concurrency))
            if "limited" in parts:
                got["keyed_limited"].append(drain_keyed(url, args.jobs, args.keys,
                                                        args.concurrency, limited=True))
                got["plain_limited"].append(drain_keyed(url, args.jobs, 0, args.concurrency,
                                                        limited=True))
                if "keys" not in parts:  # else the keys' own drain without keys is it
                    got["plain"].append(drain_keyed(url, args.jobs, 0, args.concurrency))
                if then:
                    got["keyed_limited_then"].append(drain_keyed(
                        then_url, args.jobs, args.keys, args.concurrency, True, then))
                    got["plain_limited_then"].append(drain_keyed(
                        then_url, args.jobs, 0, args.concurrency, True, then))
                    print(f"  then: keys {got['keyed_limited_then'][-1]:.0f}, "
                          f"no keys {got['plain_limited_then'][-1]:.0f} (limited)", flush=True)
                print(f"  round {len(got['plain'])}: keys {got['keyed_limited'][-1]:.0f}, "
                      f"no keys {got['plain_limited'][-1]:.0f} (limited), "
                      f"no keys {got['plain'][-1]:.0f} (no limit) jobs/s", flush=True)
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
        # 0.0: a part not run (the drains of awc before keys without --limited-before)
        return round(median(got[top]) / median(got[bottom]), 3) if got[top] and got[bottom] \
            else 0.0

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
            [k / p for k, p in zip(got["keyed"], got["plain"], strict=True)]
            if got["keyed"] else [], 3),  # --only limited drains "plain" alone
        "keys_target": ">= 0.9",
        "limited_drain_distinct_keys_jobs_per_s": _spread(got["keyed_limited"]),
        "limited_drain_no_keys_jobs_per_s": _spread(got["plain_limited"]),
        "limited_keys_over_no_keys": ratio("keyed_limited", "plain_limited"),
        "limited_keys_over_no_keys_by_round": _spread(
            [k / p for k, p in zip(got["keyed_limited"], got["plain_limited"], strict=True)], 3),
        "limited_no_keys_jobs_per_s_without_the_limit": _spread(got["plain"]),
        "limited_no_keys_over_unlimited": ratio("plain_limited", "plain"),
        "limited_before_rev": args.limited_before,
        "limited_then_distinct_keys_jobs_per_s": _spread(got["keyed_limited_then"]),
        "limited_then_no_keys_jobs_per_s": _spread(got["plain_limited_then"]),
        "limited_keys_now_over_then": ratio("keyed_limited", "keyed_limited_then"),
        "limited_no_keys_now_over_then": ratio("plain_limited", "plain_limited_then"),
        "now_no_keys_jobs_per_s": _spread(got["now"]),
        "before_keys_jobs_per_s": _spread(got["before"]),
        "now_over_before": ratio("now", "before"),
        "now_over_before_by_round": _spread(
            [n / b for n, b in zip(got["now"], got["before"], strict=True)], 3),
        "before_target": ">= 0.97",
    }
    report("fairness", figures, context)
    return figures


if __name__ == "__main__":
    main()
