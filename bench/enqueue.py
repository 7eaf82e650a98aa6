"""enqueue (SPEC §14): bulk enqueue through the public Python API.

    python -m bench.enqueue [--jobs 200000] [--batch 10000] [--runs 3]

`tick.enqueue_many` in batches (one statement per batch), committed per
batch, jobs/s over the whole run.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from bench.common import bench_url, machine, median, report, reset
from tick.db import connect
from tick.queue import enqueue_many


def run(url: str, jobs: int, batch: int) -> float:
    with connect(url) as conn:
        reset(conn)
        rows = [{"kind": "noop", "payload": {"n": 1}}] * batch
        began = time.perf_counter()
        for start in range(0, jobs, batch):
            enqueue_many(conn, rows[: min(batch, jobs - start)])
        took = time.perf_counter() - began
        count = conn.execute("SELECT count(*) FROM awc.jobs").fetchone()
        assert count is not None and count[0] == jobs
    return jobs / took


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    url = bench_url()
    rates = [run(url, args.jobs, args.batch) for _ in range(args.runs)]
    figures = {"enqueue_jobs_per_s": round(median(rates)), "runs": [round(r) for r in rates]}
    with connect(url) as conn:
        report("enqueue", figures, {"machine": machine(conn), "jobs": args.jobs,
                                    "batch": args.batch, "api": "tick.enqueue_many"})
    return figures


if __name__ == "__main__":
    main()
