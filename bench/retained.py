"""retained (SPEC §14, §11): does throughput hold with finished rows kept?

    python -m bench.retained [--drain 20000] [--finished 5000000] [--runs 3]

Drains `--drain` no-op jobs with one `awc tick` process, first with an empty
table, then with `--finished` COMPLETED rows retained in it (finished just
now, so no prune would take them; the table as it is between two prunes of
a busy queue). Prints both rates and their ratio (target ≥ 0.85).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from bench.common import bench_url, enqueue_noops, machine, median, report, reset
from bench.drain import drain_prepared
from tick.db import connect

# Finished rows as awc leaves them: one attempt, lease cleared, result kept,
# in the finished part completions go to (SPEC §24, migration 0013).
RETAIN = """
INSERT INTO awc.jobs_done_{part} (id, kind, state, attempts, run_at, started_at, finished_at,
                                  result, updated_at)
SELECT nextval(pg_get_serial_sequence('awc.jobs', 'id')), 'noop', 'COMPLETED', 1, now(), now(),
       now(), 'null'::jsonb, now()
FROM generate_series(1, %s)
"""


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--drain", type=int, default=20_000)
    parser.add_argument("--finished", type=int, default=5_000_000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    url = bench_url()
    empties = []
    for _ in range(args.runs):
        with connect(url) as conn:
            reset(conn)
            enqueue_noops(conn, args.drain)
        empties.append(drain_prepared(url, args.drain, args.concurrency))
    began = time.perf_counter()
    with connect(url) as conn:
        reset(conn)
        part = conn.execute("SELECT slot FROM awc.done_parts WHERE current").fetchone()
        conn.execute(RETAIN.format(part=int(part[0]) if part else 0), (args.finished,))
        conn.commit()
        conn.execute("VACUUM ANALYZE awc.jobs")
        conn.execute("CHECKPOINT")
    loaded = time.perf_counter() - began
    fulls = []
    for n in range(args.runs):
        first = args.finished + 1 + n * args.drain
        with connect(url) as conn:
            enqueue_noops(conn, args.drain)
        fulls.append(drain_prepared(url, args.drain, args.concurrency, first_id=first))
    with connect(url) as conn:
        reset(conn)  # 5M rows are not left behind for the next benchmark
        context = {"machine": machine(conn), "drained": args.drain,
                   "finished_rows": args.finished, "load_s": round(loaded, 1),
                   "concurrency": args.concurrency, "driver": "awc tick (one process)"}
    empty, full = median(empties), median(fulls)
    figures = {"empty_table_jobs_per_s": round(empty), "retained_jobs_per_s": round(full),
               "retained_over_empty": round(full / empty, 3),
               "empty_runs": [round(x) for x in empties],
               "retained_runs": [round(x) for x in fulls]}
    report("retained", figures, context)
    return figures


if __name__ == "__main__":
    main()
