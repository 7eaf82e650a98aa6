"""Every figure the README quotes, in one run, as a table of result,
reference, ratio and target (the targets of the performance work).

    python -m bench.all [--quick] [--from BENCH]

Runs, one after the other on the same machine: pgbench's own claim +
fenced-complete loop, drain, the raw loops beside pgbench and the drain on a
server of their own (bench.raw_loop), the peer bench's Graphile Worker beside
awc (bench.peers), enqueue, the empty tick, the warm Lambda,
latency, backlog, schedules, limits, checkpoints, concurrent ticks,
retained finished rows, real handlers before and after, tracing's cost, the console's
pages on 1M jobs, lease renewals, dependencies (a claim with children
waiting, independent jobs before and after) and the graphs (fan-in,
fan-out, a chain), fairness across keys, and the drain and
a steady load under a pinned xmin horizon on a server of their own (each also prints its
own section and writes bench/results/<name>.json). `--quick` uses smaller
sizes and fewer runs, for a look rather than a figure. The benches that take
a server (BENCH_DATABASE_URL) get the embedded PostgreSQL with initdb's
defaults, started for the run, unless --database-url names one; the others
start their own.
"""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Callable
from typing import Any

from bench.horizon import cluster

# (figure, bench, how to read it from the figures) -> (result, reference, ratio, target, met)
Row = tuple[str, str, str, str, str, str]


def _written(name: str) -> dict[str, Any]:
    """The figures bench `name` wrote last (a run resumed with --from)."""
    import json

    from bench.common import RESULTS

    data: dict[str, Any] = json.loads((RESULTS / f"{name}.json").read_text())
    print(f"== {name}: read from {RESULTS / (name + '.json')}, written at {data['at']}",
          flush=True)
    return {k: v for k, v in data.items() if k not in ("benchmark", "at", "context")}


def _run(name: str, argv: list[str]) -> dict[str, Any]:
    module = importlib.import_module(f"bench.{name}")
    figures: dict[str, Any] = module.main(argv)
    return figures


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--database-url",
                        help="the server for the benches that take one (default: start one)")
    parser.add_argument("--from", dest="start", metavar="BENCH",
                        help="resume a run that stopped at BENCH: the benches before it are "
                             "read from what they wrote in bench/results")
    args = parser.parse_args(argv)
    q = args.quick
    runs = ["--runs", "1" if q else "3"]
    got: dict[str, dict[str, Any]] = {}
    plan: list[tuple[str, list[str]]] = [
        ("pgbench", ["--batches", "256", "--secs", "5" if q else "10"]),
        ("drain", [*runs, "--jobs", "5000" if q else "20000"]),
        # Decision 0037: on a server of its own with production defaults.
        ("raw_loop", ["--rounds", "3" if q else "9", "--jobs", "5000" if q else "20000"]),
        # The peer bench's Graphile Worker (fast preset) and awc, on a server of their own.
        ("peers", ["--runs", "1" if q else "3", "--jobs", "5000" if q else "20000"]),
        ("enqueue", [*runs, "--jobs", "50000" if q else "200000"]),
        ("empty_tick", ["--runs", "3" if q else "7"]),
        ("lambda_warm", ["--invocations", "300" if q else "2000", "--runs", "3" if q else "7"]),
        ("latency", ["--jobs", "200" if q else "1000"]),
        ("backlog", [*runs, "--big", "100000" if q else "1000000",
                     "--finished", "10000" if q else "100000"]),
        ("schedules", ["--runs", "3" if q else "7", "--drain-runs", runs[1]]),
        ("limits", [*runs, "--jobs", "5000" if q else "20000"]),
        ("checkpoints", [*runs, "--jobs", "500" if q else "2000"]),
        ("concurrent", [*runs, "--jobs", "5000" if q else "20000"]),
        ("retained", [*runs, "--finished", "500000" if q else "5000000"]),
        ("handlers", [*runs, "--jobs", "1000" if q else "3000"]),
        ("tracing", ["--rounds", "3" if q else "5", "--jobs", "5000" if q else "20000"]),
        ("console", ["--jobs", "100000" if q else "1000000", "--runs", "3" if q else "5"]),
        # SPEC §24: each on a server of its own with autovacuum on (bench/horizon.py).
        ("horizon", ["--slices", "3" if q else "10", "--slice-jobs", "20000" if q else "100000"]),
        ("prune", ["--finished", "500000" if q else "5000000"]),
        ("claim_cursor", ["--runs", "3" if q else "9", "--jobs", "5000" if q else "20000"]),
        ("leases", ["--runs", "3" if q else "7", "--jobs", "5000" if q else "20000"]),
        ("dependencies", [*runs, "--children", "20000" if q else "100000",
                          "--jobs", "5000" if q else "20000"]),
        # SPEC §20's graphs, each against as many independent jobs, in turns;
        # 21 rounds: a fan-out's rounds spread over 0.2 of its ratio (0033).
        ("graphs", ["--runs", "3" if q else "21", "--graph", "2000" if q else "10000",
                    "--chain", "200" if q else "1000"]),
        # SPEC §23: on a server of its own, like the horizon benches.
        ("fairness", [*runs, "--jobs", "5000" if q else "20000",
                      "--keys", "2000" if q else "10000", "--flood", "10000" if q else "40000",
                      "--small", "40" if q else "100"]),
        ("horizon_steady", ["--rate", "3000", "--clean-secs", "20" if q else "60",
                            "--pinned-secs", "40" if q else "180",
                            "--recovery-secs", "30" if q else "120",
                            "--window-secs", "10" if q else "30"]),
    ]
    # The benches that measure on a server they are given (BENCH_DATABASE_URL)
    # get one with production defaults, autovacuum on, like those that start
    # their own: a team's shared service may be tuned otherwise.
    given = os.environ.get("BENCH_DATABASE_URL")
    with cluster(args.database_url) as (admin, server):
        os.environ["BENCH_DATABASE_URL"] = admin
        print(f"server for the benches that take one: {server}", flush=True)
        try:
            names = [name for name, _ in plan]
            if args.start is not None and args.start not in names:
                raise SystemExit(f"bench.all: no bench {args.start!r} to resume at")
            for name, bench_argv in plan:
                if args.start is not None and names.index(name) < names.index(args.start):
                    got[name] = _written(name)
                    continue
                got[name] = _run(name, bench_argv)
        finally:  # the caller's environment as it was
            if given is None:
                del os.environ["BENCH_DATABASE_URL"]
            else:
                os.environ["BENCH_DATABASE_URL"] = given
    rows = [_row(*spec, got) for spec in SPECS]
    widths = [max(len(r[i]) for r in [HEADER, *rows]) for i in range(len(HEADER))]
    print("\n== all")
    for line in [HEADER, *rows]:
        print("  " + "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)))
    return rows


HEADER: Row = ("figure", "result", "reference", "ratio", "target", "met")

Get = Callable[[dict[str, dict[str, Any]]], float]


class Absolute:
    """A target on the figure itself, its reference printed for scale only."""

    def __init__(self, check: Callable[[float], bool]) -> None:
        self.check = check

    def __call__(self, value: float) -> bool:
        return self.check(value)


def _row(figure: str, result: Get, reference: Get | None, target: str,
         check: Callable[[float], bool], unit: str, got: dict[str, dict[str, Any]]) -> Row:
    value = result(got)
    ref = reference(got) if reference is not None else None
    ratio = value / ref if ref else None
    judged = value if isinstance(check, Absolute) or ratio is None else ratio
    return (figure, f"{value:g}{unit}", "-" if ref is None else f"{ref:g}{unit}",
            "-" if ratio is None else f"{ratio:.3f}", target, "yes" if check(judged) else "no")


SPECS: list[tuple[str, Get, Get | None, str, Callable[[float], bool], str]] = [
    ("drain, jobs/s, vs pgbench loop at batch 256",
     lambda g: g["drain"]["drain_jobs_per_s"], lambda g: g["pgbench"]["batch_256_jobs_per_s"],
     ">= 0.92", lambda r: r >= 0.92, ""),
    # bench.raw_loop (decision 0037): interleaved rounds, medians, own server.
    ("drain, jobs/s, vs pgbench's loop on the same jobs (raw_loop, medians)",
     lambda g: g["raw_loop"]["engine_jobs_per_s"]["median"],
     lambda g: g["raw_loop"]["pgbench_jobs_per_s"]["median"], ">= 0.92", lambda r: r >= 0.92, ""),
    ("drain, jobs/s, vs a raw psycopg loop on two connections (a Python client's limit)",
     lambda g: g["raw_loop"]["engine_jobs_per_s"]["median"],
     lambda g: g["raw_loop"]["raw_overlapped_jobs_per_s"]["median"], ">= 0.9",
     lambda r: r >= 0.9, ""),
    ("raw psycopg loop over awc's statements, one connection, vs pgbench's loop",
     lambda g: g["raw_loop"]["raw_serial_jobs_per_s"]["median"],
     lambda g: g["raw_loop"]["pgbench_jobs_per_s"]["median"], "(reported)", lambda r: True, ""),
    ("raw psycopg loop, two connections, vs one",
     lambda g: g["raw_loop"]["raw_overlapped_jobs_per_s"]["median"],
     lambda g: g["raw_loop"]["raw_serial_jobs_per_s"]["median"], "(reported)", lambda r: True, ""),
    ("drain, jobs/s, one awc tick vs Graphile Worker's fast preset (peer bench, same jobs)",
     lambda g: g["peers"]["awc_jobs_per_s"],
     lambda g: g["peers"]["graphile_fast_jobs_per_s"], ">= 1", lambda r: r >= 1, ""),
    ("drain, jobs/s, now vs awc before bench.raw_loop",
     lambda g: g["raw_loop"]["engine_jobs_per_s"]["median"],
     lambda g: g["raw_loop"]["engine_before_jobs_per_s"]["median"], ">= 0.97",
     lambda r: r >= 0.97, ""),
    ("enqueue, jobs/s, vs the server's COPY",
     lambda g: g["enqueue"]["enqueue_jobs_per_s"],
     lambda g: g["enqueue"]["server_ceiling_jobs_per_s"], ">= 0.95", lambda r: r >= 0.95, ""),
    ("empty awc tick, s, vs python -c 'import psycopg'",
     lambda g: g["empty_tick"]["empty_tick_s"], lambda g: g["empty_tick"]["import_psycopg_s"],
     "<= 1.15", lambda r: r <= 1.15, ""),
    ("warm Lambda, nothing to do, p50 ms", lambda g: g["lambda_warm"]["warm_p50_ms"], None,
     "<= 1.0", lambda v: v <= 1.0, ""),
    ("warm Lambda, p99 ms", lambda g: g["lambda_warm"]["warm_p99_ms"], None, "<= 3",
     lambda v: v <= 3, ""),
    ("warm Lambda, round trips", lambda g: g["lambda_warm"]["warm_round_trips"], None, "<= 2",
     lambda v: v <= 2, ""),
    ("Lambda entry cold import, s, vs psycopg + powertools",
     lambda g: g["lambda_warm"]["cold_import_s"],
     lambda g: g["lambda_warm"]["reference_import_s"], "<= 1.2", lambda r: r <= 1.2, ""),
    ("awc loop latency p50, ms", lambda g: g["latency"]["p50_ms"], None, "<= 2",
     lambda v: v <= 2, ""),
    ("awc loop latency p99, ms", lambda g: g["latency"]["p99_ms"], None, "<= 10",
     lambda v: v <= 10, ""),
    ("drain with a 1M-job backlog vs 10k",
     lambda g: g["backlog"]["big_table_jobs_per_s"],
     lambda g: g["backlog"]["small_table_jobs_per_s"], ">= 0.9", lambda r: r >= 0.9, ""),
    ("empty tick with 10,000 schedules none due vs none",
     lambda g: g["schedules"]["empty_tick_without_s"],
     lambda g: g["schedules"]["empty_tick_with_schedules_s"], ">= 0.95",
     lambda r: r >= 0.95, ""),
    ("drain with 10,000 schedules none due vs none",
     lambda g: g["schedules"]["drain_with_schedules_jobs_per_s"],
     lambda g: g["schedules"]["drain_without_jobs_per_s"], ">= 0.95", lambda r: r >= 0.95, ""),
    ("drain, no limit rows, vs awc before limits",
     lambda g: g["limits"]["no_limits_jobs_per_s"], lambda g: g["limits"]["before_jobs_per_s"],
     ">= 0.97", lambda r: r >= 0.97, ""),
    ("drain, 10 limits on other kinds, vs none",
     lambda g: g["limits"]["ten_other_limits_jobs_per_s"],
     lambda g: g["limits"]["no_limits_jobs_per_s"], ">= 0.95", lambda r: r >= 0.95, ""),
    ("empty tick with 10 limits none binding vs none",
     lambda g: g["limits"]["empty_tick_no_limits_s"],
     lambda g: g["limits"]["empty_tick_ten_limits_s"], ">= 0.95", lambda r: r >= 0.95, ""),
    ("drain, its own kind limited (never binding), vs none",
     lambda g: g["limits"]["own_limit_jobs_per_s"],
     lambda g: g["limits"]["no_limits_jobs_per_s"], ">= 0.9", lambda r: r >= 0.9, ""),
    ("checkpointing every 10 of 100 units of 16 KiB hashing, jobs/s, vs none",
     lambda g: g["checkpoints"]["jobs_per_s_with"],
     lambda g: g["checkpoints"]["jobs_per_s_without"], "(reported)", lambda r: True, ""),
    ("4 awc tick processes on one queue vs 1, jobs/s",
     lambda g: g["concurrent"]["together_jobs_per_s"],
     lambda g: g["concurrent"]["one_process_jobs_per_s"], ">= 0.9", lambda r: r >= 0.9, ""),
    ("drain with 5M finished rows retained vs none",
     lambda g: g["retained"]["retained_jobs_per_s"],
     lambda g: g["retained"]["empty_table_jobs_per_s"], ">= 0.85", lambda r: r >= 0.85, ""),
    ("console, slowest page over HTTP with 1M jobs, ms, vs SELECT count(*)",
     lambda g: g["console"]["slowest_page_worst_ms"],
     lambda g: g["console"]["count_all_jobs_ms"], "< 300 ms",
     Absolute(lambda v: v < 300), ""),
    ("drain, tracing API and no provider, jobs/s, vs tracing code off",
     lambda g: g["tracing"]["api_jobs_per_s"], lambda g: g["tracing"]["off_jobs_per_s"],
     ">= 0.98", lambda r: r >= 0.98, ""),
    ("drain, tracing SDK with a no-op exporter, jobs/s, vs tracing code off",
     lambda g: g["tracing"]["sdk_jobs_per_s"], lambda g: g["tracing"]["off_jobs_per_s"],
     "(stated)", lambda r: True, ""),
    ("1 ms sleep handler, jobs/s, now vs before the performance work",
     lambda g: g["handlers"]["sleep1ms_now_jobs_per_s"],
     lambda g: g["handlers"]["sleep1ms_before_jobs_per_s"], ">= 0.95 (no slower)",
     lambda r: r >= 0.95, ""),
    ("one-query handler, jobs/s, now vs before the performance work",
     lambda g: g["handlers"]["onequery_now_jobs_per_s"],
     lambda g: g["handlers"]["onequery_before_jobs_per_s"], ">= 0.95 (no slower)",
     lambda r: r >= 0.95, ""),
    ("pinned horizon drain, jobs/s, worst slice vs the same slice free",
     lambda g: g["horizon"]["worst_slice_pinned_jobs_per_s"],
     lambda g: g["horizon"]["worst_slice_free_jobs_per_s"], ">= 0.9", lambda r: r >= 0.9, ""),
    ("pinned horizon drain, jobs/s, last slice vs first",
     lambda g: g["horizon"]["pinned_last_slice_jobs_per_s"],
     lambda g: g["horizon"]["pinned_first_slice_jobs_per_s"], ">= 0.9", lambda r: r >= 0.9, ""),
    ("drain with nothing pinned, jobs/s, with the claim's cursor vs before it",
     lambda g: g["claim_cursor"]["now_jobs_per_s"],
     lambda g: g["claim_cursor"]["before_jobs_per_s"], ">= 0.97", lambda r: r >= 0.97, ""),
    ("drain, jobs/s, no job with a key vs awc before keys",
     lambda g: g["fairness"]["now_no_keys_jobs_per_s"]["median"],
     lambda g: g["fairness"]["before_keys_jobs_per_s"]["median"], ">= 0.97",
     lambda r: r >= 0.97, ""),
    ("drain, jobs/s, 10,000 distinct keys vs no keys",
     lambda g: g["fairness"]["drain_distinct_keys_jobs_per_s"]["median"],
     lambda g: g["fairness"]["drain_no_keys_jobs_per_s"]["median"], ">= 0.9",
     lambda r: r >= 0.9, ""),
    ("drain, jobs/s, 10,000 distinct keys vs no keys, a kind limit binding",
     lambda g: g["fairness"]["limited_drain_distinct_keys_jobs_per_s"]["median"],
     lambda g: g["fairness"]["limited_drain_no_keys_jobs_per_s"]["median"], "(reported)",
     lambda r: True, ""),
    ("drain, jobs/s, no keys, a kind limit binding vs none",
     lambda g: g["fairness"]["limited_drain_no_keys_jobs_per_s"]["median"],
     lambda g: g["fairness"]["limited_no_keys_jobs_per_s_without_the_limit"]["median"],
     "(reported)", lambda r: True, ""),
    ("a small key's p99 latency, ms, while a big key floods vs no flood",
     lambda g: g["fairness"]["small_key_flooded_p99_ms"]["median"],
     lambda g: g["fairness"]["small_key_quiet_p99_ms"]["median"], "< 1 s",
     Absolute(lambda v: v < 1000), " ms"),
    ("drain of no-op jobs, jobs/s, renewing leases vs renewal off",
     lambda g: g["leases"]["drain_renewing_jobs_per_s"],
     lambda g: g["leases"]["drain_renewal_off_jobs_per_s"], ">= 0.98", lambda r: r >= 0.98, ""),
    ("renewing 1,000 running leases, round trips",
     lambda g: g["leases"]["renew_running_exchanges"], None, "1", lambda v: v == 1, ""),
    ("renewing 1,000 running leases, ms", lambda g: g["leases"]["renew_running_ms"], None,
     "(reported)", lambda v: True, " ms"),
    # SPEC §20 (bench/dependencies.py, bench/graphs.py).
    ("claim buffers, 100,000 children waiting vs none",
     lambda g: g["dependencies"]["claim_buffers_with_waiting"],
     lambda g: g["dependencies"]["claim_buffers_no_waiting"], "<= 1.1", lambda r: r <= 1.1, ""),
    ("fan-in 10,000 -> 1, jobs/s, vs independent jobs",
     lambda g: g["graphs"]["fan_in_jobs_per_s"],
     lambda g: g["graphs"]["fan_in_independent_jobs_per_s"], ">= 0.8",
     lambda r: r >= 0.8, ""),
    ("fan-out 1 -> 10,000, jobs/s, vs independent jobs",
     lambda g: g["graphs"]["fan_out_jobs_per_s"],
     lambda g: g["graphs"]["fan_out_independent_jobs_per_s"], ">= 0.8",
     lambda r: r >= 0.8, ""),
    ("chain of 1,000, jobs/s, vs independent jobs one at a time",
     lambda g: g["graphs"]["chain_jobs_per_s"],
     lambda g: g["graphs"]["chain_independent_jobs_per_s"], ">= 0.8",
     lambda r: r >= 0.8, ""),
    ("independent jobs, jobs/s, vs awc before dependencies",
     lambda g: g["dependencies"]["independent_now_jobs_per_s"],
     lambda g: g["dependencies"]["independent_before_jobs_per_s"], ">= 0.97",
     lambda r: r >= 0.97, ""),
    ("pinned horizon, claim buffers per call, last slice vs first",
     lambda g: g["horizon"]["pinned_claim_buffers_last"],
     lambda g: g["horizon"]["pinned_claim_buffers_first"], "(reported)", lambda r: True, ""),
    ("retention of 5M completed jobs under a pin, s: by parts vs batch DELETE",
     lambda g: g["prune"]["parts_secs"], lambda g: g["prune"]["delete_secs"], "<= 0.1",
     lambda r: r <= 0.1, ""),
    ("steady load, jobs/s, worst pinned window vs clean",
     lambda g: g["horizon_steady"]["worst_pinned_jobs_per_s"],
     lambda g: g["horizon_steady"]["clean_jobs_per_s"], ">= 0.9", lambda r: r >= 0.9, ""),
    ("steady load, jobs/s, last recovery window vs clean",
     lambda g: g["horizon_steady"]["last_recovery_jobs_per_s"],
     lambda g: g["horizon_steady"]["clean_jobs_per_s"], ">= 0.9", lambda r: r >= 0.9, ""),
]


if __name__ == "__main__":
    main()
