"""checkpoints (SPEC §17): what `ctx.checkpoint` costs a handler.

    python -m bench.checkpoints [--jobs 2000] [--units 100] [--every 10]
                                [--unit-bytes 16384] [--concurrency 32] [--runs 3]

Jobs of `--units` steps, each hashing `--unit-bytes` (SHA-256, about 10 µs
per 16 KiB here; 0 for no work at all), drained by one `awc tick` process:
once checkpointing every `--every` steps (each checkpoint a fenced write
that extends the lease and is durable when the call returns, batched with
every slot's into the coordinator's round trips), and once never, in the
same run, interleaved. Jobs/s of each, their ratio, and checkpoints/s. Every
job must end COMPLETED with one attempt, and with its last checkpoint saved.
"""

from __future__ import annotations

import argparse
from typing import Any

from bench.common import bench_url, machine, median, report, reset
from bench.drain import drain_prepared
from tick.db import connect
from tick.producer import enqueue_many


def run(url: str, jobs: int, units: int, every: int, unit_bytes: int,
        concurrency: int) -> float:
    """jobs/s of one drain, checkpointing every `every` units (0: never)."""
    payload = {"units": units, "every": every, "unit_bytes": unit_bytes}
    with connect(url) as conn:
        reset(conn)
        for start in range(0, jobs, 10_000):
            enqueue_many(conn, [{"kind": "units", "payload": payload}]
                         * min(10_000, jobs - start))
    rate = drain_prepared(url, jobs, concurrency)
    if every:
        with connect(url) as conn:
            saved = conn.execute("SELECT count(*) FROM awc.jobs WHERE checkpoint = %s::jsonb",
                                 (f'{{"next": {units - units % every}}}',)).fetchone()
        if saved != (jobs,):
            raise SystemExit(f"verification failed: {saved} of {jobs} jobs kept their checkpoint")
    return rate


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--units", type=int, default=100)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--unit-bytes", type=int, default=16384)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    url = bench_url()
    plain, checkpointing = [], []
    for _ in range(args.runs):  # interleaved: the machine's noise falls on both
        plain.append(run(url, args.jobs, args.units, 0, args.unit_bytes, args.concurrency))
        checkpointing.append(run(url, args.jobs, args.units, args.every, args.unit_bytes,
                                 args.concurrency))
    per_job = args.units // args.every
    figures = {
        "jobs_per_s_without": round(median(plain)),
        "jobs_per_s_with": round(median(checkpointing)),
        "ratio_with_over_without": round(median(checkpointing) / median(plain), 3),
        "checkpoints_per_s": round(median(checkpointing) * per_job),
        "checkpoints_per_job": per_job,
    }
    with connect(url) as conn:
        report("checkpoints", figures, {
            "machine": machine(conn), "driver": "awc tick (one process)", "jobs": args.jobs,
            "units": args.units, "every": args.every, "unit_bytes": args.unit_bytes,
            "concurrency": args.concurrency,
            "runs": args.runs})
    return figures


if __name__ == "__main__":
    main()
