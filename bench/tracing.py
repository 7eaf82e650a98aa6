"""tracing (SPEC §21): what tracing costs a drain of no-op jobs by one
`awc tick` process, in three setups, rounds interleaved:

    python -m bench.tracing [--jobs 20000] [--concurrency 256] [--rounds 5]

off: awc's tracing code disabled (tick.engine.spans.ENABLED = False).
api: the OpenTelemetry API imported and no tracer provider set: what every
  installation with the `otel` extra and no SDK configured runs (the target:
  >= 0.98 of off).
sdk: the SDK's TracerProvider with a BatchSpanProcessor and an exporter that
  drops every batch: every job a span, nothing sent (stated, no target).

Each round drains a fresh queue once per setup, the setups' order rotating
from round to round, so a slow minute on a shared machine falls on each in
turn. The ratios are medians over rounds of the ratio within each round;
jobs/s and the `awc tick` process's CPU time per 1,000 jobs are medians over
rounds, with the spread of jobs/s (min-max).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bench.common import bench_url, enqueue_noops, machine, median, report, reset
from bench.drain import drain_prepared
from tick.db import connect

SETUPS = ("off", "api", "sdk")


def worker(setup: str, argv: list[str]) -> None:
    """Set tracing up as `setup` says, then run awc's CLI with `argv`."""
    if setup == "off":
        import tick.engine.spans as spans

        spans.ENABLED = False
    elif setup == "api":
        import opentelemetry.trace  # noqa: F401 (imported: tracer() then asks for a provider)
    elif setup == "sdk":
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            SpanExporter,
            SpanExportResult,
        )

        class Dropped(SpanExporter):
            def export(self, spans: Any) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Dropped()))
        trace.set_tracer_provider(provider)
    from tick.cli import main

    sys.argv = ["awc", *argv]
    main()


def drain(url: str, setup: str, jobs: int, concurrency: int) -> tuple[float, float]:
    """jobs/s of one drain, and the CPU seconds its `awc tick` process used
    per 1,000 jobs (user + system: steadier than the wall clock on a shared
    machine, and what a span per job would add to)."""
    import resource

    with connect(url) as conn:
        reset(conn)
        enqueue_noops(conn, jobs)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    rate = drain_prepared(url, jobs, concurrency,
                          awc=[sys.executable, "-m", "bench.tracing", "--worker", setup])
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return rate, cpu / jobs * 1000


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    url = bench_url()
    got: dict[str, list[float]] = {setup: [] for setup in SETUPS}
    cpu: dict[str, list[float]] = {setup: [] for setup in SETUPS}
    for n in range(args.rounds):
        for setup in SETUPS[n % 3:] + SETUPS[:n % 3]:
            rate, secs = drain(url, setup, args.jobs, args.concurrency)
            got[setup].append(rate)
            cpu[setup].append(secs)
    mid = {setup: median(values) for setup, values in got.items()}

    def paired(setup: str) -> float:
        """The median over rounds of this setup's jobs/s over off's in the same round."""
        return median(a / b for a, b in zip(got[setup], got["off"], strict=True))

    figures: dict[str, Any] = {
        **{f"{setup}_jobs_per_s": round(mid[setup]) for setup in SETUPS},
        "api_over_off": round(paired("api"), 3),
        "sdk_over_off": round(paired("sdk"), 3),
        **{f"{setup}_cpu_ms_per_1k_jobs": round(median(cpu[setup]) * 1000, 1)
           for setup in SETUPS},
        **{f"{setup}_spread_jobs_per_s": [round(min(v)), round(max(v))]
           for setup, v in got.items()},
        **{f"{setup}_runs": [round(x) for x in v] for setup, v in got.items()},
    }
    with connect(url) as conn:
        context = {"machine": machine(conn), "driver": "awc tick (one process)",
                   "jobs": args.jobs, "concurrency": args.concurrency, "rounds": args.rounds,
                   "order": "setups rotate each round", "sdk": "BatchSpanProcessor, "
                   "an exporter that drops every batch"}
    report("tracing", figures, context)
    return figures


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3:])
    else:
        main()
