"""lambda (SPEC §14): what a scheduled Lambda invocation with nothing to do
costs, since Lambda bills every millisecond of every idle schedule.

    python -m bench.lambda_warm [--invocations 2000] [--runs 7] [--profile FILE]

warm: the handler called in-process (real PostgreSQL, an empty queue, a fake
context, a scheduler event) again and again after one cold call: p50 and p99
of the call, the round trips one warm call makes, counted from libpq's
trace of the connection, and the time split of a call: waiting in psycopg
for the server's answers (the server's work, loopback, libpq's reading)
against the rest, awc's, psycopg's and powertools' Python. The log lines
go to /dev/null, as CloudWatch takes them off the process.

cold import: a process importing the entry module
(`tick.drivers.aws_lambda`), against one importing what any Python Lambda
on PostgreSQL with powertools imports (psycopg, and powertools' Logger and
Metrics), in the same run, interleaved; the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

from bench.common import ROOT, bench_url, machine, median, report, reset, timed_process
from tick.db import connect

ENTRY = "import tick.drivers.aws_lambda"
REFERENCE = "import psycopg; from aws_lambda_powertools import Logger, Metrics"


class Context:
    function_name = "awc-tick"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:awc-tick"
    aws_request_id = "bench"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def child(invocations: int, profile: str | None = None) -> None:
    """Runs in its own process, stdout to /dev/null; figures on stderr. With
    `profile`, the warm calls run under pyinstrument, its tree written there."""
    import tick.drivers.aws_lambda as entry
    from tests.exchanges import exchanges

    event = {"scheduled_time": "2026-12-01T03:00:00Z", "execution_id": "bench"}
    entry.handler(event, Context())  # cold
    if profile is not None:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.0005)
        with profiler:
            for _ in range(invocations):
                entry.handler(event, Context())
        with open(profile, "w", encoding="utf-8") as out:
            out.write(profiler.output_text(unicode=False, color=False))
    times = []
    for _ in range(invocations):
        began = time.perf_counter()
        entry.handler(event, Context())
        times.append(time.perf_counter() - began)
    conn = entry.WARM.conn
    assert conn is not None
    turns = exchanges(conn, lambda: entry.handler(event, Context()))
    waited, calls = split(entry, event, conn, invocations)
    times.sort()
    print(json.dumps({"p50": times[len(times) // 2], "p99": times[int(len(times) * 0.99)],
                      "round_trips": turns, "waited": waited, "calls": calls}), file=sys.stderr)


def split(entry: Any, event: dict[str, str], conn: Any, invocations: int
          ) -> tuple[float, float]:
    """The time split of a warm call, medians over `invocations` more calls:
    the part spent in psycopg's wait for the server's answers (the two
    exchanges: the server's work, loopback and libpq's reading), and the
    whole call. The connection's `wait` is wrapped on this instance only."""
    inner = conn.wait
    spent = [0.0]

    def wait(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - began

    conn.wait = wait
    waited, calls = [], []
    try:
        for _ in range(invocations):
            spent[0] = 0.0
            began = time.perf_counter()
            entry.handler(event, Context())
            calls.append(time.perf_counter() - began)
            waited.append(spent[0])
    finally:
        del conn.wait
    return median(waited), median(calls)


def timed_import(code: str, env: dict[str, str]) -> float:
    took, exit_code = timed_process([sys.executable, "-c", code], env=env)
    if exit_code != 0:
        raise SystemExit(f"the import {code!r} failed with exit {exit_code}")
    return took


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--invocations", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--profile", metavar="FILE",
                        help="also profile the warm calls with pyinstrument (pip install "
                             "pyinstrument) and write its call tree to FILE")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.invocations, args.profile)
        return {}
    if args.profile is not None:
        import importlib.util

        if importlib.util.find_spec("pyinstrument") is None:
            raise SystemExit("bench.lambda_warm: --profile needs pyinstrument "
                             "(pip install pyinstrument)")
    url = bench_url()
    with connect(url) as conn:
        reset(conn)
        conn.execute("TRUNCATE awc.ticks")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWC_")}
    env.update(DATABASE_URL=url, AWC_CAS_URL="memory://", PYTHONPATH=str(ROOT),
               POWERTOOLS_METRICS_NAMESPACE="awc", POWERTOOLS_SERVICE_NAME="awc")
    profiling = [] if args.profile is None else ["--profile", os.path.abspath(args.profile)]
    done = subprocess.run([sys.executable, "-m", "bench.lambda_warm", "--child",
                           "--invocations", str(args.invocations), *profiling], env=env, cwd=ROOT,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"bench.lambda_warm: the warm loop failed:\n{done.stderr[-2000:]}")
    warm = json.loads(done.stderr.strip().splitlines()[-1])
    timed_import(ENTRY, env)  # warm the .pyc files and the page cache
    entry, reference = [], []
    for _ in range(args.runs):  # interleaved
        entry.append(timed_import(ENTRY, env))
        reference.append(timed_import(REFERENCE, env))
    figures = {
        "warm_p50_ms": round(warm["p50"] * 1000, 3),
        "warm_p99_ms": round(warm["p99"] * 1000, 3),
        "warm_round_trips": warm["round_trips"],
        # Where a warm call's time goes (medians of calls timed apart).
        "warm_split_ms": {"waiting_on_postgresql": round(warm["waited"] * 1000, 3),
                          "in_the_process": round((warm["calls"] - warm["waited"]) * 1000, 3)},
        "cold_import_s": round(median(entry), 3),
        "reference_import_s": round(median(reference), 3),
        "cold_import_ratio": round(median(entry) / median(reference), 3),
    }
    with connect(url) as conn:
        report("lambda_warm", figures, {"machine": machine(conn), "runs": args.runs,
                                        "invocations": args.invocations})
    return figures


if __name__ == "__main__":
    main()
