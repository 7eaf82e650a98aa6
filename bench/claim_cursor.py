"""claim_cursor (SPEC §24, docs/decisions/0027): the drain with no pinned
horizon, now against awc as it was before the claim's cursor, on the same
server, interleaved.

    python -m bench.claim_cursor [--jobs N] [--runs R] [--before REV]

The claim now walks from its cursor and probes for jobs made ready behind
it; a drain with nothing pinned must not pay for that. Each round drains
`--jobs` no-op jobs with one `awc tick` process, first with awc at REV (by
default the commit before migrations/0012_claim_cursor.sql was added, in a
database it migrated itself), then with this checkout, on the server the
horizon bench starts (the embedded PostgreSQL with initdb's defaults,
autovacuum on) unless --database-url names one. Jobs/s from the jobs' own
timestamps; medians and the ratio now/before (target >= 0.97).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from bench.common import (
    before_url,
    bench_url,
    install_before,
    machine,
    median,
    report,
    rev_before_adding,
)
from bench.drain import drain_fresh
from bench.horizon import cluster
from tick.db import connect

BEFORE_DB = "awc_bench_before_cursor"


def before_rev() -> str:
    """The commit before the claim's cursor landed."""
    return rev_before_adding("migrations/0012_claim_cursor.sql", "claim_cursor")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--before", help="the commit to compare with")
    parser.add_argument("--database-url", help="a server to use instead of starting one")
    args = parser.parse_args(argv)
    rev = args.before or before_rev()
    with cluster(args.database_url) as (admin, server), \
            tempfile.TemporaryDirectory(prefix="awc-before-") as scratch:
        url = bench_url(admin)
        site = install_before(rev, Path(scratch))
        old_url = before_url(site, BEFORE_DB, admin)
        before, now = [], []
        for _ in range(args.runs):  # interleaved: the machine's noise falls on both
            before.append(drain_fresh(old_url, args.jobs, args.concurrency, site))
            now.append(drain_fresh(url, args.jobs, args.concurrency))
        with connect(url) as conn:
            context = {"machine": machine(conn), "server": server, "before_rev": rev,
                       "jobs": args.jobs, "runs": args.runs, "concurrency": args.concurrency}
    figures = {
        "before_jobs_per_s": round(median(before)),
        "now_jobs_per_s": round(median(now)),
        "now_over_before": round(median(now) / median(before), 3),
        "before_runs": [round(r) for r in before],
        "now_runs": [round(r) for r in now],
        "target": ">= 0.97",
    }
    report("claim_cursor", figures, context)
    return figures


if __name__ == "__main__":
    main()
