"""leases (SPEC §26): what the engine's lease renewals cost.

    python -m bench.leases [--jobs 20000] [--concurrency 256] [--runs 5]
                           [--running 1000] [--renewals 20]

drain: N no-op jobs drained by one engine in this process, once as it runs
(the engine keeps the claimed jobs' own timeouts, which the claim returns;
every claimed job whose timeout reaches past its lease is tracked for
renewal) and once with renewal off (`RunSpec(renew_leases=False)`: no
timeout kept, nothing tracked), in the same run, the rounds interleaved so the machine's noise
falls on both. Jobs/s of each from the database (first claim to last
completion), medians, spreads (min..max) and the ratio; target >= 0.98.
Every job must end COMPLETED with one attempt.

renewal: `--running` jobs claimed and held RUNNING, then all their leases
renewed at once as the coordinator does (one fenced `extend_leases.sql`
over arrays), `--renewals` times: the time of one such round trip (median,
spread) and its exchanges with the server (1).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from bench.common import bench_url, enqueue_noops, machine, median, report, reset
from tick.db import connect
from tick.queue import ClaimRequest, Writes, round_trip


def drain(url: str, jobs: int, concurrency: int, renew: bool) -> float:
    """jobs/s of one in-process engine over `jobs` fresh no-op jobs."""
    import bench.kinds  # noqa: F401  (registers the no-op kind)
    from tick.engine.api import Engine, RunSpec

    with connect(url) as conn:
        reset(conn)
        enqueue_noops(conn, jobs)
    with connect(url) as conn:
        engine = Engine(lambda: conn, worker_id="bench-leases")
        spec = RunSpec(max_jobs=jobs, deadline=time.monotonic() + 900,
                       concurrency=concurrency, lease_secs=300, renew_leases=renew)
        done = engine.run(spec)
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE state = 'COMPLETED' AND attempts = 1), "
            "extract(epoch FROM max(finished_at) - min(started_at))::float8 "
            "FROM awc.jobs").fetchone()
    assert row is not None
    if done.completed != jobs or row[0] != jobs:
        raise SystemExit(f"verification failed: {row[0]} of {jobs} jobs completed once")
    return jobs / float(row[1])


def renewals(url: str, running: int, times: int) -> tuple[list[float], int]:
    """Seconds of each renewal of `running` leases in one round trip, and
    the exchanges one of them takes."""
    from tests.exchanges import exchanges

    with connect(url) as conn:
        reset(conn)
        enqueue_noops(conn, running)
        request = ClaimRequest([f"bench-{n}" for n in range(running)], 300.0, 300.0, "{}",
                               None, None)
        claimed = round_trip(conn, Writes(), request).claimed
        if len(claimed) != running:
            raise SystemExit(f"claimed {len(claimed)} of {running} jobs")
        writes = Writes(renewals=[(row.id, row.token, 300.0) for row in claimed])
        took = []
        for _ in range(times):
            began = time.perf_counter()
            done = round_trip(conn, writes, None)
            took.append(time.perf_counter() - began)
            if len(done.extended) != running:
                raise SystemExit(f"renewed {len(done.extended)} of {running} leases")
        turns = exchanges(conn, lambda: round_trip(conn, writes, None))
    return took, turns


def spread(values: list[float], digits: int = 0) -> str:
    return f"{round(min(values), digits):g}..{round(max(values), digits):g}"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--running", type=int, default=1000)
    parser.add_argument("--renewals", type=int, default=20)
    args = parser.parse_args(argv)
    url = bench_url()
    on, off = [], []
    for n in range(args.runs):  # interleaved, and which goes first alternates
        for renew in ((True, False) if n % 2 == 0 else (False, True)):
            (on if renew else off).append(drain(url, args.jobs, args.concurrency, renew))
    took, turns = renewals(url, args.running, args.renewals)
    figures = {
        "drain_renewing_jobs_per_s": round(median(on)),
        "drain_renewal_off_jobs_per_s": round(median(off)),
        "ratio_renewing_over_off": round(median(on) / median(off), 3),
        "drain_renewing_spread": spread(on),
        "drain_renewal_off_spread": spread(off),
        "drain_renewing_runs": [round(x) for x in on],
        "drain_renewal_off_runs": [round(x) for x in off],
        "renew_running_ms": round(median(took) * 1000, 2),
        "renew_running_spread_ms": spread([t * 1000 for t in took], 2),
        "renew_running_exchanges": turns,
    }
    with connect(url) as conn:
        report("leases", figures, {
            "machine": machine(conn), "driver": "one engine in this process",
            "jobs": args.jobs, "concurrency": args.concurrency, "runs": args.runs,
            "running": args.running, "renewals": args.renewals, "lease_secs": 300})
    return figures


if __name__ == "__main__":
    main()
