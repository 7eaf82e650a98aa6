"""handlers (SPEC §14): the performance work must not make real work slower.

    python -m bench.handlers [--jobs 5000] [--concurrency 64] [--runs 3]
                             [--before REV]

Drains of N jobs by one `awc tick` process, interleaved in one run, with
two handlers that do something: `sleep1ms` waits 1 ms (a fast remote call)
and `onequery` runs one query on its own connection (one per worker
thread). Each is drained by awc before the performance work (REV, by
default the commit before pydantic-settings was removed, laid out apart
from this checkout and draining its own database) and by awc now. Prints
jobs/s of each and now/before; a ratio below 1 would mean the fast path
was bought at the expense of real handlers.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import psycopg

from bench.common import (
    ROOT,
    before_url,
    bench_url,
    install_before,
    machine,
    median,
    report,
    server_url,
)
from bench.drain import drain_fresh
from tick.db import connect

BEFORE_DB = "awc_bench_handlers_before"
KINDS = ("sleep1ms", "onequery")


def before_rev() -> str:
    """The commit before the performance work's first change."""
    found = subprocess.run(
        ["git", "log", "--format=%H", "--grep", "pydantic-settings (90 ms of every cold start)"],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    if not found:
        raise SystemExit("bench.handlers: the performance work's first commit is not in this "
                         "history; give --before")
    return f"{found[-1]}^"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=5_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", help="the commit to compare with")
    args = parser.parse_args(argv)
    url = bench_url()
    rev = args.before or before_rev()
    got: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="awc-before-") as scratch:
        site = install_before(rev, Path(scratch))
        old_url = before_url(site, BEFORE_DB)
        for _ in range(args.runs):  # interleaved: the machine's noise falls on both
            for kind in KINDS:
                got.setdefault((kind, "before"), []).append(
                    drain_fresh(old_url, args.jobs, args.concurrency, site, kind))
                got.setdefault((kind, "now"), []).append(
                    drain_fresh(url, args.jobs, args.concurrency, kind=kind))
    with psycopg.connect(server_url(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BEFORE_DB}")
    figures: dict[str, Any] = {}
    for kind in KINDS:
        before, now = median(got[(kind, "before")]), median(got[(kind, "now")])
        figures[f"{kind}_before_jobs_per_s"] = round(before)
        figures[f"{kind}_now_jobs_per_s"] = round(now)
        figures[f"{kind}_now_over_before"] = round(now / before, 3)
    with connect(url) as conn:
        report("handlers", figures, {"machine": machine(conn), "driver": "awc tick (one process)",
                                     "jobs": args.jobs, "concurrency": args.concurrency,
                                     "runs": args.runs, "before": rev})
    return figures


if __name__ == "__main__":
    main()
