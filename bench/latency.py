"""latency (SPEC §14): enqueue-to-start in `awc loop`, p50 and p99.

    python -m bench.latency [--jobs 1000] [--gap-ms 5]

One `awc loop` process (poll interval 60 s, so NOTIFY does the waking) runs;
jobs are enqueued one at a time, each in its own transaction, `--gap-ms`
apart. Latency is the job's `started_at` (claim) less its `created_at`
(enqueue), both from the database clock.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from typing import Any

from bench.common import ROOT, bench_url, machine, report, reset
from tick.db import connect
from tick.producer import enqueue


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--gap-ms", type=float, default=5.0)
    args = parser.parse_args(argv)
    url = bench_url()
    with connect(url) as conn:
        reset(conn)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWC_")}
    env.update(DATABASE_URL=url, AWC_CAS_URL="memory://", AWC_HANDLER_MODULES="bench.kinds",
               PYTHONPATH=str(ROOT), AWC_WORKER_POLL_INTERVAL_MS="60000")
    loop = subprocess.Popen([sys.executable, "-m", "tick.cli", "loop"], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with connect(url) as conn:
            deadline = time.monotonic() + 30
            while conn.execute("SELECT count(*) FROM pg_stat_activity "
                               "WHERE query LIKE 'LISTEN%%'").fetchone() != (1,):
                if time.monotonic() > deadline:
                    raise SystemExit("the loop did not start listening")
                time.sleep(0.05)
            for _ in range(args.jobs):
                enqueue(conn, "noop")
                time.sleep(args.gap_ms / 1000)
            deadline = time.monotonic() + 60
            while conn.execute("SELECT count(*) FROM awc.jobs WHERE state <> 'COMPLETED'"
                               ).fetchone() != (0,):
                if time.monotonic() > deadline:
                    raise SystemExit("jobs did not complete")
                time.sleep(0.05)
            row = conn.execute(
                "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY lat), "
                "percentile_cont(0.99) WITHIN GROUP (ORDER BY lat), max(lat) FROM "
                "(SELECT extract(epoch FROM started_at - created_at) * 1000 AS lat "
                "FROM awc.jobs) AS l").fetchone()
            assert row is not None
            figures = {"p50_ms": round(float(row[0]), 2), "p99_ms": round(float(row[1]), 2),
                       "max_ms": round(float(row[2]), 2)}
            report("latency", figures, {"machine": machine(conn), "jobs": args.jobs,
                                        "gap_ms": args.gap_ms, "driver": "awc loop",
                                        "poll_interval_ms": 60000})
    finally:
        loop.send_signal(signal.SIGTERM)
        loop.wait(60)
    return figures


if __name__ == "__main__":
    main()
