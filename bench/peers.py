"""peers (issue: one process ahead of Graphile Worker): awc's drain against
Graphile Worker's fast preset on the same no-op jobs, in one run.

    python -m bench.peers [--runs R] [--jobs N] [--peers DIR]

Copies the peer bench (DIR, by default ../shared/peers beside this
checkout, or $AWC_PEERS_DIR) to a scratch folder and runs its `run.sh` with
BENCH_PEERS="graphile awc" on a PostgreSQL of its own with initdb's
settings (bench.own_server's, on loopback): Graphile Worker 0.17.3 as its
package-lock.json pins it (`npm install` from the registry), its `fast`
preset (local queue of 500, batched completions), and this checkout's
`awc tick` at concurrency 256, each enqueueing and draining --jobs no-op
jobs --runs times and timing empty run-once starts. Prints each drain's
median and spread and awc's over Graphile's (target >= 1).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import psycopg

from bench.common import ROOT, machine, report
from bench.own_server import loopback

PORT = 55331


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--peers", type=Path, default=Path(
        os.environ.get("AWC_PEERS_DIR") or ROOT.parent / "shared" / "peers"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="awc-peers-") as scratch:
        bench = Path(scratch) / "peers"
        shutil.copytree(args.peers, bench, ignore=shutil.ignore_patterns(
            "results", "node_modules", ".venv-*"))
        with loopback(PORT) as reach:
            env = {**os.environ, **reach, "AWC_PROJECT": str(ROOT),
                   "BENCH_PEERS": "graphile awc", "BENCH_GW_CONFIGS": "fast",
                   "BENCH_AWC_CONCURRENCIES": "256", "BENCH_RUNS": str(args.runs),
                   "BENCH_N": str(args.jobs)}
            subprocess.run(["./run.sh"], cwd=bench, env=env, check=True)
            with psycopg.connect(f"postgresql://postgres@127.0.0.1:{PORT}/postgres") as conn:
                measured_on = machine(conn)
        graphile = json.loads((bench / "results" / "graphile_fast.json").read_text())
        awc = json.loads((bench / "results" / "awc_c256.json").read_text())
    figures: dict[str, Any] = {
        "graphile_fast_jobs_per_s": round(graphile["drain_jobs_s"]["median"]),
        "graphile_fast_runs": [round(x) for x in graphile["drain_jobs_s"]["all"]],
        "awc_jobs_per_s": round(awc["drain_jobs_s"]["median"]),
        "awc_runs": [round(x) for x in awc["drain_jobs_s"]["all"]],
        "awc_over_graphile_fast": round(awc["drain_jobs_s"]["median"]
                                        / graphile["drain_jobs_s"]["median"], 3),
        "graphile_empty_run_s": round(graphile["empty_tick_s"]["median"], 3),
        "awc_empty_run_s": round(awc["empty_tick_s"]["median"], 3),
    }
    context = {"jobs": args.jobs, "runs": args.runs, "graphile": graphile["config"],
               "awc": awc["config"], "versions": [graphile["versions"], awc["versions"]],
               "server": "own embedded PostgreSQL on loopback, initdb defaults",
               "machine": measured_on}
    report("peers", figures, context)
    return figures


if __name__ == "__main__":
    main()
