"""backlog (SPEC §14): does throughput hold as the table grows?

    python -m bench.backlog [--drain 10000] [--big 1000000] [--finished 100000]

Drains `--drain` no-op jobs with one `awc tick` process twice: once with
only those jobs in the table (10k), once with the table at `--big` rows,
of which `--finished` are COMPLETED rows not yet pruned and the rest ready
jobs. Prints both rates and their ratio (big / small).
"""

from __future__ import annotations

import argparse
from typing import Any

from bench.common import bench_url, enqueue_noops, machine, median, report, reset
from bench.drain import drain_prepared
from tick.db import connect


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--drain", type=int, default=10_000)
    parser.add_argument("--big", type=int, default=1_000_000)
    parser.add_argument("--finished", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    url = bench_url()
    smalls = []
    for _ in range(args.runs):
        with connect(url) as conn:
            reset(conn)
            enqueue_noops(conn, args.drain)
        smalls.append(drain_prepared(url, args.drain, args.concurrency))
    with connect(url) as conn:
        reset(conn)
        enqueue_noops(conn, args.big, batch=50_000)
        conn.execute(
            "UPDATE awc.jobs SET state = 'COMPLETED', attempts = 1, started_at = now(), "
            "finished_at = now() WHERE id <= %s", (args.finished,))
        conn.execute("VACUUM ANALYZE awc.jobs")
        conn.execute("CHECKPOINT")
    bigs = []
    for n in range(args.runs):
        # Each run drains the next slice of the backlog: the table stays ~1M rows.
        first = args.finished + 1 + n * args.drain
        bigs.append(drain_prepared(url, args.drain, args.concurrency, first_id=first))
    small, big = median(smalls), median(bigs)
    figures = {"small_table_jobs_per_s": round(small), "big_table_jobs_per_s": round(big),
               "ratio_big_over_small": round(big / small, 3),
               "small_runs": [round(x) for x in smalls], "big_runs": [round(x) for x in bigs]}
    with connect(url) as conn:
        report("backlog", figures, {"machine": machine(conn), "drained": args.drain,
                                    "big_table_rows": args.big, "finished_rows": args.finished,
                                    "concurrency": args.concurrency,
                                    "driver": "awc tick (one process)"})
    return figures


if __name__ == "__main__":
    main()
