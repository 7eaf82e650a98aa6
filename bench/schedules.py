"""schedules (SPEC §15): firing 10,000 due schedules, and what 10,000
schedules that are not due cost an empty tick.

    python -m bench.schedules [--schedules 10000] [--runs 7]

fire: 10,000 schedules, each due once (`* * * * *`, its next fire a minute
ago, missed=latest), fired by the maintenance step of one process; fires
enqueued per second, and every due schedule must have its ledger row and job.

empty tick: a cold `awc tick` process with nothing to do, in the same run,
interleaved, on a database holding 10,000 schedules none of which is due
against the same database with none; the ratio (≥ 0.95 is the target) is
what the due check costs: one entry of an index, in a statement every tick
sends anyway. drain: `--drain` no-op jobs drained by one `awc tick` process
with and without the same 10,000 schedules, interleaved (target ≥ 0.95).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from bench.common import bench_url, enqueue_noops, machine, median, report, reset
from bench.drain import drain_prepared
from bench.empty_tick import env_for, once
from tick.db import connect

ADD_SCHEDULES = """
INSERT INTO awc.schedules (name, cron, kind, next_fire_at)
SELECT 'bench-' || n, '* * * * *', 'noop', date_trunc('minute', now()) - interval '1 minute'
FROM generate_series(1, %(n)s) AS n
"""


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from tick.schedules.firing import fire_due

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--drain", type=int, default=10_000)
    parser.add_argument("--drain-runs", type=int, default=3)
    args = parser.parse_args(argv)
    url = bench_url()
    with connect(url) as conn:
        reset(conn)
        conn.execute("TRUNCATE awc.schedules, awc.schedule_fires")
        conn.execute(ADD_SCHEDULES, {"n": args.schedules})
        began = time.perf_counter()
        enqueued = 0
        while True:
            done = fire_due(conn)
            enqueued += done.enqueued
            # Each schedule fires every minute: on a slow machine a second
            # round would come due before the first ends, so stop at one.
            if not done.rows or enqueued >= args.schedules:
                break
        took = time.perf_counter() - began
        jobs = conn.execute("SELECT count(*) FROM awc.jobs").fetchone()
        fired = conn.execute("SELECT count(DISTINCT schedule) FROM awc.schedule_fires "
                             "WHERE job_id IS NOT NULL").fetchone()
        assert jobs is not None and jobs[0] == enqueued >= args.schedules, (jobs, enqueued)
        assert fired == (args.schedules,), fired  # every schedule has its ledger row and job
        # Not due: the next fire an hour away, for the empty-tick comparison.
        conn.execute("UPDATE awc.schedules SET cron = '0 0 1 1 *', "
                     "next_fire_at = now() + interval '1 hour'")
        conn.execute("DELETE FROM awc.jobs")
        conn.execute("DROP TABLE IF EXISTS public.awc_bench_schedules")
        conn.execute("CREATE TABLE public.awc_bench_schedules AS SELECT * FROM awc.schedules")
        conn.execute("VACUUM ANALYZE awc.schedules")
    env = env_for(url)
    once(env)
    with_schedules, without = [], []
    for _ in range(args.runs):  # interleaved: the machine's noise falls on both
        with_schedules.append(once(env))
        with connect(url) as conn:
            conn.execute("TRUNCATE awc.schedules")
        without.append(once(env))
        with connect(url) as conn:
            conn.execute("INSERT INTO awc.schedules SELECT * FROM public.awc_bench_schedules")
    drain_with, drain_without = [], []
    for _ in range(args.drain_runs):
        drain_with.append(_drain(url, args.drain))
        with connect(url) as conn:
            conn.execute("TRUNCATE awc.schedules")
        drain_without.append(_drain(url, args.drain))
        with connect(url) as conn:
            conn.execute("INSERT INTO awc.schedules SELECT * FROM public.awc_bench_schedules")
    with connect(url) as conn:
        conn.execute("DROP TABLE public.awc_bench_schedules")
        conn.execute("TRUNCATE awc.schedules, awc.schedule_fires")
    figures = {
        "fires_per_s": round(enqueued / took),
        "fired": enqueued,
        "fire_s": round(took, 3),
        "empty_tick_with_schedules_s": round(median(with_schedules), 3),
        "empty_tick_without_s": round(median(without), 3),
        "ratio_without_over_with": round(median(without) / median(with_schedules), 3),
        "drain_with_schedules_jobs_per_s": round(median(drain_with)),
        "drain_without_jobs_per_s": round(median(drain_without)),
        "drain_with_over_without": round(median(drain_with) / median(drain_without), 3),
    }
    with connect(url) as conn:
        report("schedules", figures, {"machine": machine(conn), "schedules": args.schedules,
                                      "runs": args.runs})
    return figures


def _drain(url: str, jobs: int) -> float:
    with connect(url) as conn:
        conn.execute("TRUNCATE awc.jobs, awc.job_parents, awc.walk_marks RESTART IDENTITY")
        enqueue_noops(conn, jobs)
        conn.execute("VACUUM ANALYZE awc.jobs")
    return drain_prepared(url, jobs, 256)


if __name__ == "__main__":
    main()
