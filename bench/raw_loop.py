"""raw_loop (SPEC §14, docs/decisions/0037): the limit of a Python client on
this machine for the drain, beside pgbench's loop and the engine's drain.

    python -m bench.raw_loop [--rounds 9] [--jobs 20000] [--concurrency 256]
                             [--lanes 2] [--database-url URL]

Four ways to drain the same `--jobs` no-op jobs, interleaved round by round
(the order rotates each round, so a shared machine's drift falls on all):

- pgbench: pgbench's own loop (bench/pgbench.py's script: claim a batch
  with SKIP LOCKED and complete it fenced, one transaction each), one
  client, exactly as many transactions as the jobs take at `--concurrency`.
- raw serial: a raw psycopg loop over awc's own statements, one connection:
  each exchange records the previous batch with the fenced complete and
  claims the next `--concurrency` jobs (`tick.queue.round_trip`: plan pins,
  the limits' steps, the fair and plain claims, the timeouts), one
  transaction per exchange, the claim's cursor and whether to send the
  limits' lanes carried as the engine carries them.
- raw overlapped: the same loop in `--lanes` lanes, each its own connection
  and thread with `--concurrency / --lanes` of the slots, so one lane's
  exchange runs on the server while another's results are decoded and its
  next exchange built (psycopg releases the GIL while it waits).
- engine: one `awc tick` process at `--concurrency` (bench.drain).
- engine before: the same, by awc at `--before` (by default the commit
  before this bench was added), in a database that version migrated.

A figure is jobs over seconds: for the engine, from the database's own
timestamps (first claim to last completion); for the loops, wall time of
the loop. Every run checks that every job completed exactly once.

The server runs with production defaults: by default the bench starts its
own embedded PostgreSQL with initdb's defaults (bench.horizon.cluster:
fsync and synchronous_commit on, autovacuum on); `--database-url` names
another server instead.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import (
    before_url,
    bench_url,
    enqueue_noops,
    install_before,
    machine,
    median,
    report,
    reset,
    rev_before_adding,
)
from bench.drain import drain_fresh, drain_prepared
from bench.horizon import cluster
from bench.pgbench import SCRIPT
from tick.db import connect
from tick.engine.cursor import Cursor
from tick.queue import ClaimRequest, Writes, round_trip

WAYS = ("pgbench", "raw_serial", "raw_overlapped", "engine", "engine_before")
BEFORE_DB = "awc_bench_before_overlap"


def _fresh(url: str, jobs: int) -> None:
    with connect(url) as conn:
        reset(conn)
        enqueue_noops(conn, jobs)
        conn.execute("VACUUM ANALYZE awc.jobs")


def _check(url: str, jobs: int) -> None:
    with connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE state = 'COMPLETED' AND attempts = 1), "
            "count(*) FILTER (WHERE state <> 'COMPLETED' OR attempts <> 1) FROM awc.jobs"
        ).fetchone()
    assert row is not None
    if int(row[0]) != jobs or int(row[1]):
        raise SystemExit(f"verification failed: {row[0]} of {jobs} completed once, "
                         f"{row[1]} otherwise")


def _lane(url: str, slots: list[str], done: list[int], ready: threading.Barrier) -> None:
    """One raw serial loop: record the previous batch, claim the next, one
    exchange each, until a claim comes back empty."""
    with connect(url) as conn:
        cursor = Cursor()
        previous: list[Any] = []
        lanes = True  # step 2 of the limits, while step 1 sees one (as the engine)
        ready.wait()
        while True:
            writes = Writes()
            writes.complete.extend((row.id, row.token, None) for row in previous)
            claim = ClaimRequest(slots, 300.0, 300.0, "{}", None, None,
                                 cursor=cursor.params(time.monotonic()), lanes=lanes)
            result = round_trip(conn, writes, claim)
            cursor.moved(result.mark, time.monotonic())
            lanes = result.lanes
            done[0] += len(result.recorded)
            previous = result.claimed
            if not previous:
                break


def raw(url: str, jobs: int, concurrency: int, lanes: int) -> float:
    """The raw loop's jobs/s in `lanes` lanes (1: serial)."""
    _fresh(url, jobs)
    per = concurrency // lanes
    counts = [[0] for _ in range(lanes)]
    ready = threading.Barrier(lanes + 1)
    threads = [threading.Thread(
        target=_lane, args=(url, [f"raw-{k}-{n}" for n in range(per)], counts[k], ready))
        for k in range(lanes)]
    for thread in threads:
        thread.start()
    ready.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    took = time.perf_counter() - began
    done = sum(c[0] for c in counts)
    assert done == jobs, (done, jobs)
    _check(url, jobs)
    return jobs / took


def pgbench(url: str, jobs: int, batch: int) -> float:
    """pgbench's loop over the same jobs: jobs/s."""
    _fresh(url, jobs)
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "claim_complete.sql"
        script.write_text(SCRIPT.format(batch=batch))
        done = subprocess.run(
            ["pgbench", "-n", "-M", "extended", "-c", "1", "-t", str(jobs // batch),
             "-f", str(script), "-d", url], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"pgbench failed: {done.stderr.strip().splitlines()[-1:]}")
    match = re.search(r"tps = ([0-9.]+)", done.stdout)
    if match is None:
        raise SystemExit("pgbench printed no tps")
    return float(match.group(1)) * batch


def engine(url: str, jobs: int, concurrency: int) -> float:
    _fresh(url, jobs)
    return drain_prepared(url, jobs, concurrency)


def spread(values: list[float]) -> dict[str, Any]:
    ordered = sorted(values)
    return {"median": round(median(values)), "min": round(ordered[0]),
            "max": round(ordered[-1]), "runs": [round(v) for v in values]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--lanes", type=int, default=2)
    parser.add_argument("--ways", nargs="+", choices=WAYS, default=list(WAYS))
    parser.add_argument("--database-url", help="a server to use instead of starting one")
    parser.add_argument("--before", help="the commit to compare the engine with")
    parser.add_argument("--switch-ms", type=float,
                        help="the interpreter's thread switch interval for the lanes (ms)")
    args = parser.parse_args(argv)
    if args.switch_ms:
        import sys

        sys.setswitchinterval(args.switch_ms / 1000)
    got: dict[str, list[float]] = {way: [] for way in args.ways}
    measure: dict[str, Any] = {
        "pgbench": lambda url: pgbench(url, args.jobs, args.concurrency),
        "raw_serial": lambda url: raw(url, args.jobs, args.concurrency, 1),
        "raw_overlapped": lambda url: raw(url, args.jobs, args.concurrency, args.lanes),
        "engine": lambda url: engine(url, args.jobs, args.concurrency),
    }
    with cluster(args.database_url) as (admin, server), \
            tempfile.TemporaryDirectory(prefix="awc-before-") as scratch:
        url = bench_url(admin)
        rev = ""
        if "engine_before" in args.ways:
            rev = args.before or rev_before_adding("bench/raw_loop.py", "raw_loop")
            site = install_before(rev, Path(scratch))
            old_url = before_url(site, BEFORE_DB, admin)
            measure["engine_before"] = lambda _: drain_fresh(
                old_url, args.jobs, args.concurrency, site)
        for k in range(args.rounds):
            order = args.ways[k % len(args.ways):] + args.ways[:k % len(args.ways)]
            for way in order:
                got[way].append(measure[way](url))
            print(f"  round {k + 1}: " + ", ".join(
                f"{way} {got[way][-1]:,.0f}" for way in args.ways), flush=True)
        with connect(url) as conn:
            context = {"machine": machine(conn), "server": server, "jobs": args.jobs,
                       "concurrency": args.concurrency, "lanes": args.lanes,
                       "rounds": args.rounds, "before_rev": rev}
    figures: dict[str, Any] = {f"{way}_jobs_per_s": spread(got[way]) for way in args.ways}

    def ratio(top: str, bottom: str) -> float:
        return round(median(got[top]) / median(got[bottom]), 3)

    pairs = [("engine", "pgbench"), ("engine", "engine_before"), ("engine_before", "pgbench"),
             ("engine", "raw_overlapped"), ("engine", "raw_serial"),
             ("raw_serial", "pgbench"), ("raw_overlapped", "pgbench"),
             ("raw_overlapped", "raw_serial")]
    for top, bottom in pairs:
        if top in got and bottom in got:
            figures[f"{top}_over_{bottom}"] = ratio(top, bottom)
    report("raw_loop", figures, context)
    return figures


if __name__ == "__main__":
    main()
