"""pgbench reference (SPEC §14): the database's own ceiling for batched
claim + fenced complete, measured by pgbench with no Python anywhere.

    python -m bench.pgbench [--batches 50 256] [--secs 10]

Each pgbench transaction claims a batch of ready no-op jobs (SKIP LOCKED, a
new claim token each) in awc's claim order, which its ready index serves,
and completes them fenced on id, token and RUNNING, in one transaction:
the loop the published reference figures for this class of machine were
taken with. Its jobs/s calibrate a machine: the drain and
enqueue targets assume a machine where this loop reaches about 28k jobs/s at
batch 50 and 46-50k at 200-500.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench.common import bench_url, enqueue_noops, machine, report, reset
from tick.db import connect

SCRIPT = """\
BEGIN;
WITH picked AS (
    SELECT id FROM ONLY awc.jobs
    WHERE state = 'PENDING' AND waiting = 0 AND run_at <= now()
    ORDER BY (-priority::int), run_at, id
    LIMIT {batch}
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE ONLY awc.jobs AS j
    SET state = 'RUNNING', attempts = j.attempts + 1, locked_by = 'pgbench',
        locked_until = now() + interval '300 seconds', claim_token = gen_random_uuid(),
        started_at = now(), updated_at = now()
    FROM picked WHERE j.id = picked.id
    RETURNING j.id, j.claim_token
)
SELECT coalesce(array_agg(id), '{{}}') AS ids, coalesce(array_agg(claim_token), '{{}}') AS tokens
FROM claimed \\gset
UPDATE ONLY awc.jobs AS j
SET state = 'COMPLETED', locked_by = NULL, locked_until = NULL, claim_token = NULL,
    finished_at = now(), updated_at = now()
WHERE j.id = ANY (:ids::bigint[])
  AND j.claim_token = (:tokens::uuid[])[array_position(:ids::bigint[], j.id)]
  AND j.state = 'RUNNING';
COMMIT;
"""


def run(url: str, batch: int, secs: int, jobs: int) -> float:
    with connect(url) as conn:
        reset(conn)
        enqueue_noops(conn, jobs, batch=50_000)
        conn.execute("VACUUM ANALYZE awc.jobs")
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "claim_complete.sql"
        script.write_text(SCRIPT.format(batch=batch))
        done = subprocess.run(
            ["pgbench", "-n", "-M", "extended", "-c", "1", "-T", str(secs), "-f", str(script),
             "-d", url], capture_output=True, text=True, timeout=secs + 120)
    if done.returncode != 0:
        raise SystemExit(f"pgbench failed: {done.stderr.strip().splitlines()[-1:]}")
    match = re.search(r"tps = ([0-9.]+)", done.stdout)
    if match is None:
        raise SystemExit("pgbench printed no tps")
    return float(match.group(1)) * batch


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[50, 256])
    parser.add_argument("--secs", type=int, default=10)
    args = parser.parse_args(argv)
    if shutil.which("pgbench") is None:
        raise SystemExit("pgbench is not on PATH (Debian: postgresql-client or postgresql-contrib)")
    url = bench_url()
    figures: dict[str, Any] = {}
    for batch in args.batches:
        # Enough ready jobs that the run never drains the table.
        figures[f"batch_{batch}_jobs_per_s"] = round(
            run(url, batch, args.secs, jobs=max(400_000, batch * 4_000)))
    with connect(url) as conn:
        report("pgbench", figures, {"machine": machine(conn), "secs": args.secs, "clients": 1,
                                    "loop": "claim batch + fenced complete, one transaction"})
    return figures


if __name__ == "__main__":
    main()
