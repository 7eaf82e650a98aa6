"""graphs (SPEC §20, docs/decisions/0033): work that spans jobs, against the
same number of independent jobs.

    python -m bench.graphs [--graph N] [--chain N] [--runs R]
                           [--shapes fan_in,fan_out,chain] [--database-url URL]

On a PostgreSQL of its own with initdb's defaults (autovacuum on), the one
bench.horizon starts, unless --database-url names a server.

* Fan-in, N parents to one child (default 10,000), and fan-out, one parent
  to N children, drained by one `awc tick` process at concurrency 64, as
  jobs/s against N + 1 independent jobs in the same run (target >= 0.8);
  the fan-in's latency, from the last parent's completion to the child's
  start, in ms.
* A chain of 1,000 (each job after the one before), drained by one `awc
  tick` at concurrency 1, against as many independent jobs at concurrency 1
  (a chain can use one slot only).

Each round drains the graph and its independent jobs back to back, in turns
(the graph first in even rounds, second in odd ones), on a queue emptied,
vacuumed and checkpointed before each (bench.common.reset), so neither side
always follows the other's dead rows or autovacuum. A ratio is given twice:
of the two sides' median jobs/s (`{shape}_ratio`, what bench.all shows) and
the median of the rounds' own ratios (`{shape}_ratio_median_of_rounds`, the
paired one), with each round's in `{shape}_ratio_runs`.
"""

from __future__ import annotations

import argparse
from typing import Any

from bench.common import fresh_database, machine, median, report, reset
from bench.drain import drain_prepared
from bench.horizon import cluster
from tick.db import connect
from tick.producer import enqueue_many

SHAPES = ("fan_in", "fan_out", "chain")
DATABASE = "awc_bench_graphs"  # its own: another checkout's awc_bench may be newer


def graph_jobs(shape: str, n: int) -> list[dict[str, Any]]:
    """The jobs of a fan-in (n parents, one child), a fan-out (one parent, n
    children) or a chain of n."""
    if shape == "fan_in":
        return [{"kind": "noop"} for _ in range(n)] + [
            {"kind": "noop", "after": [f"#{i}" for i in range(n)]}]
    if shape == "fan_out":
        return [{"kind": "noop"}] + [{"kind": "noop", "after": ["#0"]} for _ in range(n)]
    return [{"kind": "noop"}] + [{"kind": "noop", "after": [f"#{i}"]} for i in range(n - 1)]


def drain(url: str, jobs: list[dict[str, Any]], concurrency: int) -> tuple[float, list[int]]:
    """jobs/s draining `jobs`, enqueued on an emptied queue, with one `awc
    tick`; and their ids."""
    with connect(url) as conn:
        reset(conn)
        ids = enqueue_many(conn, jobs)
    return drain_prepared(url, len(jobs), concurrency), ids


def fan_in_latency(url: str, ids: list[int]) -> float:
    """ms from the last parent's completion to the child's start (the child
    is the last of `ids`)."""
    with connect(url) as conn:
        row = conn.execute(
            "SELECT extract(epoch FROM c.started_at - max(p.finished_at)) * 1000 "
            "FROM awc.jobs AS c, awc.jobs AS p WHERE c.id = %s AND p.id = ANY(%s) "
            "GROUP BY c.started_at", (ids[-1], ids[:-1])).fetchone()
    assert row is not None
    return float(row[0])


def graph_figures(figures: dict[str, Any], url: str, size: int, chain: int, runs: int,
                  shapes: tuple[str, ...] = SHAPES) -> None:
    """Each shape's figures into `figures`: R rounds, the graph and as many
    independent jobs in turns."""
    for shape in shapes:
        n, slots = (chain, 1) if shape == "chain" else (size, 64)
        jobs = graph_jobs(shape, n)
        independent = [{"kind": "noop"} for _ in jobs]
        graph: list[float] = []
        alone: list[float] = []
        latencies: list[float] = []
        for round_ in range(runs):
            for side in (("graph", "alone") if round_ % 2 == 0 else ("alone", "graph")):
                if side == "alone":
                    alone.append(drain(url, independent, slots)[0])
                    continue
                rate, ids = drain(url, jobs, slots)
                graph.append(rate)
                if shape == "fan_in":
                    latencies.append(fan_in_latency(url, ids))
        rounds = [g / a for g, a in zip(graph, alone, strict=True)]
        figures[f"{shape}_jobs_per_s"] = round(median(graph))
        figures[f"{shape}_independent_jobs_per_s"] = round(median(alone))
        figures[f"{shape}_ratio"] = round(median(graph) / median(alone), 3)
        figures[f"{shape}_ratio_median_of_rounds"] = round(median(rounds), 3)
        figures[f"{shape}_ratio_runs"] = [round(r, 3) for r in rounds]
        if latencies:
            figures[f"{shape}_latency_ms"] = round(median(latencies), 2)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", type=int, default=10_000)
    parser.add_argument("--chain", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--shapes", default=",".join(SHAPES),
                        help="which of fan_in, fan_out, chain (comma-separated)")
    parser.add_argument("--database-url", help="a server to use instead of starting one")
    args = parser.parse_args(argv)
    shapes = tuple(s for s in args.shapes.split(",") if s)
    unknown = sorted(set(shapes) - set(SHAPES))
    if unknown or not shapes:
        parser.error(f"--shapes: unknown {', '.join(unknown) or 'nothing given'}")
    figures: dict[str, Any] = {}
    with cluster(args.database_url) as (admin, server):
        url = fresh_database(admin, DATABASE)
        graph_figures(figures, url, args.graph, args.chain, args.runs, shapes)
        with connect(url) as conn:
            context = {"graph": args.graph, "chain": args.chain, "runs": args.runs,
                       "server": server, "machine": machine(conn)}
    report("graphs", figures, context)
    return figures


if __name__ == "__main__":
    main()
