"""console (SPEC §19): every console page answers in under 300 ms with
1,000,000 jobs in the table.

    python -m bench.console [--jobs 1000000] [--runs 5]

Fills the benchmark database with `--jobs` jobs (90% COMPLETED, 5% PENDING,
3% FAILED, 1% CANCELLED, 1,000 RUNNING; 20 kinds, 5 queues), 20,000 ticks,
100 schedules with their ledgers and 10 limits, then starts a real `awc ui`
process, signs in and fetches each page `--runs` times over HTTP (queries,
rendering and the network together, as an operator waits for them). Prints
each page's median and worst time, the worst against the 300 ms target,
and as a reference measured in the same run the unbounded
`SELECT count(*) FROM awc.jobs` a naive dashboard would run.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from typing import Any

from bench.common import ROOT, bench_url, machine, median, report, reset
from tick.cli_ui import served_at
from tick.db import connect

TOKEN = "bench-console-token-0123456789"
TARGET_MS = 300.0

FILL = """
INSERT INTO awc.jobs (kind, queue, state, attempts, payload, run_at, started_at, finished_at,
                      updated_at, last_error)
SELECT 'kind-' || (n %% 20), 'queue-' || (n %% 5),
       CASE WHEN n %% 100 < 90 THEN 'COMPLETED' WHEN n %% 100 < 95 THEN 'PENDING'
            WHEN n %% 100 < 98 THEN 'FAILED' WHEN n %% 100 < 99 THEN 'CANCELLED'
            ELSE 'COMPLETED' END,
       1, jsonb_build_object('n', n), now() - interval '1 hour', now() - interval '1 hour',
       CASE WHEN n %% 100 < 90 OR n %% 100 >= 95 THEN now() - interval '1 hour' END,
       now() - interval '1 hour',
       CASE WHEN n %% 100 BETWEEN 95 AND 97 THEN 'RuntimeError: upstream answered 503' END
FROM generate_series(1, %(n)s) AS n
"""
RUNNING = """
UPDATE awc.jobs SET state = 'RUNNING', locked_by = 'bench', claim_token = gen_random_uuid(),
       locked_until = now() + interval '1 hour', finished_at = NULL
WHERE id IN (SELECT id FROM awc.jobs WHERE state = 'PENDING' LIMIT 1000)
"""
TICKS = """
INSERT INTO awc.ticks (driver, worker_id, started_at, finished_at, deadline_at, claimed,
                       completed, retried, failed, stop_reason)
SELECT (ARRAY['tick', 'loop', 'lambda', 'maintenance'])[1 + n % 4], 'bench',
       now() - n * interval '10 seconds', now() - n * interval '10 seconds' + interval '2 s',
       now() - n * interval '10 seconds' + interval '55 s', 50, 48, 1, 1, 'drained'
FROM generate_series(1, 20000) AS n
"""
SCHEDULES = """
INSERT INTO awc.schedules (name, cron, kind, next_fire_at, last_fire_at)
SELECT 'schedule-' || n, '*/5 * * * *', 'kind-' || (n % 20), now() + interval '5 minutes',
       now() - interval '5 minutes'
FROM generate_series(1, 100) AS n;
INSERT INTO awc.schedule_fires (schedule, fire_at, status, job_id)
SELECT 'schedule-' || s, now() - f * interval '5 minutes', 'enqueued', s * 1000 + f
FROM generate_series(1, 100) AS s, generate_series(1, 100) AS f;
INSERT INTO awc.limits (scope, name, max_running, rate, per_secs)
SELECT 'kind', 'kind-' || n, 100, 1000, 60 FROM generate_series(1, 10) AS n
"""

PAGES = [
    ("overview", "/"),
    ("jobs, newest", "/jobs"),
    ("jobs, page 10,000 ids down", "/jobs?before={mid}"),
    ("jobs, FAILED", "/jobs?state=FAILED"),
    ("jobs, PENDING of one kind", "/jobs?state=PENDING&kind=kind-7"),
    ("jobs, a kind that matches nothing", "/jobs?kind=no-such-kind"),
    ("jobs, one queue", "/jobs?queue=queue-2"),
    ("jobs, by id", "/jobs?id={mid}"),
    ("job detail", "/jobs/{mid}"),
    ("bulk retry preview, all FAILED", "/jobs/bulk?action=retry&state=FAILED"),
    ("bulk cancel preview, one kind", "/jobs/bulk?action=cancel&kind=kind-3"),
    ("schedules", "/schedules"),
    ("schedule detail", "/schedules/schedule-42"),
    ("ticks", "/ticks"),
    ("ticks, lambda", "/ticks?driver=lambda"),
    ("limits", "/limits"),
]


def fill(url: str, jobs: int) -> None:
    with connect(url) as conn:
        reset(conn)
        conn.execute("TRUNCATE awc.ticks, awc.schedules, awc.schedule_fires, awc.limits CASCADE")
        conn.execute(FILL, {"n": jobs})
        conn.execute(RUNNING)
        conn.execute(TICKS)
        conn.execute(SCHEDULES)
        conn.execute("VACUUM ANALYZE awc.jobs")
        conn.execute("VACUUM ANALYZE awc.ticks")


def serve(url: str) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWC_")}
    env.update(DATABASE_URL=url, AWC_UI_TOKEN=TOKEN, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "tick.cli", "ui", "--port", "0"], env=env,
                            cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            text=True)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    base = served_at(line)
    if base is None:
        proc.kill()
        raise SystemExit(f"awc ui did not start: {line.strip()}")
    return proc, base


def main(argv: list[str] | None = None) -> dict[str, Any]:
    import httpx

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    url = bench_url()
    began = time.perf_counter()
    fill(url, args.jobs)
    loaded = time.perf_counter() - began
    with connect(url) as conn:
        counts = []
        for _ in range(args.runs):
            t = time.perf_counter()
            conn.execute("SELECT count(*) FROM awc.jobs").fetchone()
            counts.append((time.perf_counter() - t) * 1000)
    proc, base = serve(url)
    timings: dict[str, list[float]] = {}
    try:
        with httpx.Client(base_url=base, timeout=30) as client:
            form = client.get("/login")
            nonce = re.search(r'name="login_nonce" value="([^"]+)"', form.text)
            assert nonce is not None
            signed = client.post("/login", data={"token": TOKEN, "login_nonce": nonce.group(1),
                                                 "next": "/"})
            assert signed.status_code == 303, signed.status_code
            mid = args.jobs // 2
            for _ in range(args.runs):
                for name, path in PAGES:
                    t = time.perf_counter()
                    answer = client.get(path.format(mid=mid))
                    took = (time.perf_counter() - t) * 1000
                    if answer.status_code != 200:
                        raise SystemExit(f"{name}: {path} answered {answer.status_code}")
                    timings.setdefault(name, []).append(took)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    worst = {name: max(ms) for name, ms in timings.items()}
    figures: dict[str, Any] = {
        "pages": {name: {"median_ms": round(median(ms), 1), "worst_ms": round(max(ms), 1)}
                  for name, ms in timings.items()},
        "slowest_page": max(worst, key=lambda n: worst[n]),
        "slowest_page_worst_ms": round(max(worst.values()), 1),
        "count_all_jobs_ms": round(median(counts), 1),
        "slowest_over_count": round(max(worst.values()) / median(counts), 3),
        "all_under_300_ms": all(v < TARGET_MS for v in worst.values()),
    }
    with connect(url) as conn:
        context = {"machine": machine(conn), "jobs": args.jobs, "runs": args.runs,
                   "load_s": round(loaded, 1), "driver": "awc ui over HTTP"}
        reset(conn)
        conn.execute("TRUNCATE awc.ticks, awc.schedules, awc.schedule_fires, awc.limits CASCADE")
    for name, ms in timings.items():
        print(f"  {name:<40} median {median(ms):7.1f} ms  worst {max(ms):7.1f} ms")
    report("console", figures, context)
    return figures


if __name__ == "__main__":
    main()
