"""horizon_steady (SPEC §24): a steady load through a pinned horizon and back.

    python -m bench.horizon_steady [--rate 3000] [--consumers 2] [--clean-secs 60]
                                   [--pinned-secs 180] [--recovery-secs 120]
                                   [--window-secs 30] [--database-url URL]

A paced producer enqueues `--rate` no-op jobs per second (a batch every
100 ms, on a schedule that does not drift) while `--consumers` `awc loop`
processes run them. The run has three phases: `--clean-secs` with nothing
pinned, `--pinned-secs` while a separate connection holds a REPEATABLE READ
transaction that has taken its snapshot (the horizon pinned, as in the chaos
harness hardbyte/postgresql-job-queue-benchmarking), and `--recovery-secs`
after it ends. Throughput per `--window-secs` window is counted from the
jobs' own finished_at, each window's ratio is taken to the clean phase's mean,
and latency (finished_at - run_at) p50/p99 per window shows a queue that
falls behind. The server is the one bench.horizon uses (its own, autovacuum
on, unless `--database-url`).

Targets (SPEC §24): every pinned window >= 0.9 of clean, and the last
recovery window back to >= 0.9 of clean. The rate must be below what the
consumers can do on the machine when nothing is pinned, or the clean phase
already lags (its p99 says so).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from typing import Any

import psycopg

from bench.common import ROOT, bench_url, machine, report, reset
from bench.horizon import TARGET, cluster, pinned_horizon, server_settings, table_state
from tick.db import connect
from tick.producer import enqueue_many

BEAT = 0.1  # the producer's batch interval, seconds


def start_consumers(url: str, consumers: int, concurrency: int) -> list[subprocess.Popen[bytes]]:
    """`consumers` `awc loop` processes, returned once each listens for NOTIFY."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWC_")}
    env.update(DATABASE_URL=url, AWC_CAS_URL="memory://", AWC_HANDLER_MODULES="bench.kinds",
               PYTHONPATH=str(ROOT))
    loops = [subprocess.Popen(
        [sys.executable, "-m", "tick.cli", "loop", "--concurrency", str(concurrency)],
        env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(consumers)]
    with connect(url) as conn:
        deadline = time.monotonic() + 60
        while True:
            row = conn.execute("SELECT count(*) FROM pg_stat_activity "
                               "WHERE query LIKE 'LISTEN%%'").fetchone()
            if row is not None and int(row[0]) >= consumers:
                return loops
            if time.monotonic() > deadline or any(p.poll() is not None for p in loops):
                stop_consumers(loops)
                raise SystemExit("the awc loop consumers did not start listening")
            time.sleep(0.1)


def stop_consumers(loops: list[subprocess.Popen[bytes]]) -> None:
    for loop in loops:
        if loop.poll() is None:
            loop.send_signal(signal.SIGTERM)
    for loop in loops:
        try:
            loop.wait(60)
        except subprocess.TimeoutExpired:
            loop.kill()
            loop.wait(10)


def produce(conn: psycopg.Connection[Any], rate: float, secs: float) -> int:
    """Enqueue at `rate` jobs/s for `secs`, in a batch every BEAT seconds on
    a fixed schedule (a late beat enqueues what it owes); returns the count."""
    began = time.monotonic()
    made = 0
    while True:
        elapsed = time.monotonic() - began
        if elapsed >= secs:
            return made
        owed = int(rate * min(elapsed + BEAT, secs)) - made
        if owed > 0:
            enqueue_many(conn, [{"kind": "noop"}] * owed)
            made += owed
        pause = began + (int(elapsed / BEAT) + 1) * BEAT - time.monotonic()
        if pause > 0:
            time.sleep(pause)


def clock(conn: psycopg.Connection[Any]) -> datetime:
    row = conn.execute("SELECT clock_timestamp()").fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


WINDOW = """
SELECT count(*),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - run_at)),
       percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - run_at)),
       (SELECT count(*) FROM awc.jobs WHERE created_at >= %(a)s AND created_at < %(b)s)
FROM awc.jobs
WHERE state = 'COMPLETED' AND finished_at >= %(a)s AND finished_at < %(b)s
"""


def windows(conn: psycopg.Connection[Any], phase: str, start: datetime, end: datetime,
            secs: float) -> list[dict[str, Any]]:
    """The phase cut into windows of `secs` (the last one may be shorter):
    jobs finished per second, latency p50/p99 in ms, jobs produced per second."""
    from datetime import timedelta

    out: list[dict[str, Any]] = []
    a = start
    while a < end:
        b = min(a + timedelta(seconds=secs), end)
        span = (b - a).total_seconds()
        if span < secs / 2 and out:
            break  # a sliver at the end would only be noise
        row = conn.execute(WINDOW, {"a": a, "b": b}).fetchone()
        assert row is not None
        out.append({"phase": phase, "from_s": None, "jobs_per_s": round(int(row[0]) / span, 1),
                    "p50_ms": None if row[1] is None else round(float(row[1]) * 1000, 1),
                    "p99_ms": None if row[2] is None else round(float(row[2]) * 1000, 1),
                    "produced_per_s": round(int(row[3]) / span, 1), "secs": round(span, 1),
                    "at": a})
        a = b
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=3000.0, help="jobs enqueued per second")
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--clean-secs", type=float, default=60.0)
    parser.add_argument("--pinned-secs", type=float, default=180.0)
    parser.add_argument("--recovery-secs", type=float, default=120.0)
    parser.add_argument("--window-secs", type=float, default=30.0)
    parser.add_argument("--database-url", default=None,
                        help="a server to use instead of starting one (it should run "
                             "with autovacuum on)")
    args = parser.parse_args(argv)
    if min(args.rate, args.consumers, args.clean_secs, args.pinned_secs, args.recovery_secs,
           args.window_secs) <= 0:
        parser.error("rates, counts and durations must be positive")
    with cluster(args.database_url) as (admin, what):
        url = bench_url(admin)
        with connect(url) as conn:
            reset(conn)
            settings = server_settings(conn)
            context = {"machine": machine(conn), "server": what, "server_config": settings,
                       "rate": args.rate, "consumers": args.consumers,
                       "concurrency": args.concurrency, "clean_secs": args.clean_secs,
                       "pinned_secs": args.pinned_secs, "recovery_secs": args.recovery_secs,
                       "window_secs": args.window_secs,
                       "driver": f"{args.consumers} x awc loop, paced producer (batch every "
                                 f"{BEAT * 1000:.0f} ms)"}
        loops = start_consumers(url, args.consumers, args.concurrency)
        try:
            with connect(url) as conn:
                t0 = clock(conn)
                made = produce(conn, args.rate, args.clean_secs)
                with pinned_horizon(url) as xmin:
                    t1 = clock(conn)
                    made += produce(conn, args.rate, args.pinned_secs)
                    t2 = clock(conn)
                    pinned_state = table_state(conn)
                made += produce(conn, args.rate, args.recovery_secs)
                t3 = clock(conn)
        finally:
            stop_consumers(loops)
        with connect(url) as conn:
            rows = (windows(conn, "clean", t0, t1, args.window_secs)
                    + windows(conn, "pinned", t1, t2, args.window_secs)
                    + windows(conn, "recovery", t2, t3, args.window_secs))
            after = table_state(conn)
            reset(conn)
    clean = [w["jobs_per_s"] for w in rows if w["phase"] == "clean"]
    clean_rate = sum(clean) / len(clean)
    for w in rows:
        w["from_s"] = round((w.pop("at") - t0).total_seconds(), 1)
        w["ratio"] = round(w["jobs_per_s"] / clean_rate, 3) if clean_rate else None
    pinned = [w for w in rows if w["phase"] == "pinned"]
    recovery = [w for w in rows if w["phase"] == "recovery"]
    worst = min(pinned, key=lambda w: w["jobs_per_s"])
    figures: dict[str, Any] = {
        "server": what,
        "autovacuum": settings.get("autovacuum", "unknown"),
        "produced": made,
        "clean_jobs_per_s": round(clean_rate, 1),
        "worst_pinned_jobs_per_s": worst["jobs_per_s"],
        "worst_pinned_ratio": worst["ratio"],
        "last_recovery_jobs_per_s": recovery[-1]["jobs_per_s"],
        "last_recovery_ratio": recovery[-1]["ratio"],
        "windows": rows,
        "at_end_of_pinned": pinned_state,
        "after_recovery": after,
        "pinned_xmin": xmin,
        "target_pinned": f"every window >= {TARGET} of clean",
        "met_pinned": all((w["ratio"] or 0) >= TARGET for w in pinned),
        "target_recovery": f"last window >= {TARGET} of clean",
        "met_recovery": (recovery[-1]["ratio"] or 0) >= TARGET,
    }
    print("  window  phase     from_s  jobs/s   ratio  p50_ms    p99_ms    produced/s")
    for n, w in enumerate(rows):
        print(f"  {n + 1:>6}  {w['phase']:<8}  {w['from_s']:>6}  {w['jobs_per_s']:>7}  "
              f"{w['ratio']!s:>6}  {w['p50_ms']!s:>8}  {w['p99_ms']!s:>8}  "
              f"{w['produced_per_s']:>8}")
    report("horizon_steady", figures, context)
    return figures


if __name__ == "__main__":
    main()
