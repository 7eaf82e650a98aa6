"""concurrent (SPEC §14, §12): several ticks on one queue, no lock convoy.

    python -m bench.concurrent [--jobs 20000] [--processes 4] [--concurrency 256]
                               [--runs 3]

Drains N no-op jobs with one `awc tick` process, then with `--processes`
of them started together on the same queue (each at `--concurrency`, so
the batch each claims is the same as the one process's), interleaved. Every
job must end COMPLETED with one attempt (the drain checks it from the
database). Prints both totals in jobs/s and together/alone (target ≥ 0.9
on 2 cores: the processes share the cores and the claim's SKIP LOCKED
keeps them from waiting on each other).
"""

from __future__ import annotations

import argparse
from typing import Any

from bench.common import bench_url, enqueue_noops, machine, median, report, reset
from bench.drain import drain_prepared
from tick.db import connect


def one(url: str, jobs: int, concurrency: int, processes: int) -> float:
    with connect(url) as conn:
        reset(conn)
        enqueue_noops(conn, jobs)
    return drain_prepared(url, jobs, concurrency, processes=processes)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    url = bench_url()
    alone, together = [], []
    for _ in range(args.runs):
        alone.append(one(url, args.jobs, args.concurrency, 1))
        together.append(one(url, args.jobs, args.concurrency, args.processes))
    figures = {"one_process_jobs_per_s": round(median(alone)),
               "together_jobs_per_s": round(median(together)),
               "together_over_one": round(median(together) / median(alone), 3),
               "one_runs": [round(x) for x in alone], "together_runs": [round(x) for x in together]}
    with connect(url) as conn:
        report("concurrent", figures, {"machine": machine(conn), "jobs": args.jobs,
                                       "processes": args.processes,
                                       "concurrency": args.concurrency, "runs": args.runs,
                                       "driver": "awc tick"})
    return figures


if __name__ == "__main__":
    main()
