"""enqueue (SPEC §14): bulk enqueue through the public Python API.

    python -m bench.enqueue [--jobs 200000] [--batch 10000] [--runs 3]

`tick.enqueue_many` in batches (one COPY per batch), committed per batch,
jobs/s over the whole run. In the same run, the server's own ceiling for the
same rows: COPY of text built before the clock starts, with the ids reserved
the same way, so no Python runs per job; and the ratio of the two.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from bench.common import bench_url, machine, median, report, reset
from tick.db import connect
from tick.producer import enqueue_many
from tick.statements import sql


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


def ceiling(url: str, jobs: int, batch: int) -> float:
    """The same rows COPYed from pre-built text: what the server alone does."""
    payload = json.dumps({"n": 1}, separators=(",", ":"))
    with connect(url) as conn:
        reset(conn)
        took = 0.0
        for start in range(0, jobs, batch):
            n = min(batch, jobs - start)
            began = time.perf_counter()
            row = conn.execute(sql("reserve_job_ids"), {"n": n}).fetchone()
            assert row is not None
            took += time.perf_counter() - began
            text = "".join(f"{job_id}\tnoop\t{payload}\t5\t0\tdefault\n" for job_id in row[0])
            began = time.perf_counter()
            with conn.cursor().copy("COPY awc.jobs (id, kind, payload, max_attempts, priority, "
                                    "queue) FROM STDIN") as copy:
                copy.write(text)
            took += time.perf_counter() - began
    return jobs / took


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    url = bench_url()
    rates, ceilings = [], []
    for _ in range(args.runs):  # interleaved, so drift touches both alike
        rates.append(run(url, args.jobs, args.batch))
        ceilings.append(ceiling(url, args.jobs, args.batch))
    figures = {
        "enqueue_jobs_per_s": round(median(rates)),
        "server_ceiling_jobs_per_s": round(median(ceilings)),
        "enqueue_over_ceiling": round(median(rates) / median(ceilings), 3),
        "runs": [round(r) for r in rates],
        "ceiling_runs": [round(r) for r in ceilings],
    }
    with connect(url) as conn:
        report("enqueue", figures, {"machine": machine(conn), "jobs": args.jobs,
                                    "batch": args.batch, "api": "tick.enqueue_many"})
    return figures


if __name__ == "__main__":
    main()
