"""prune (SPEC §24, §7.3): retention of 5M completed jobs by whole parts,
against the batch DELETE it replaces, with a horizon pinned throughout.

    python -m bench.prune [--finished 5000000] [--database-url URL]

Both runs hold a REPEATABLE READ transaction open from before the rows are
written, as a `pg_dump` would (SPEC §24), on a server started for the run with
production defaults (bench.horizon's cluster: autovacuum on).

- parts (now): the completed jobs sit in the finished part that retention
  empties next, as awc's completions leave them; one forced `prune` (what
  `awc prune` does) rotates the parts.
- batch DELETE (the reference, as before migration 0013 and still the way for
  completed rows an older awc left in the hot table): the same rows in the hot
  table, finished past the retention; forced prune passes until none is left.

Each gives its time, the rows it removed, and what it leaves behind: the
relation's size on disk and the dead row versions in the hot table (counted
with pgstattuple), which under the pin no VACUUM can remove.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from bench.common import bench_url, machine, report, reset
from bench.horizon import cluster, pinned_horizon, server_settings
from tick.db import connect
from tick.maintenance import prune
from tick.parts import PARTS

WEEK = 7 * 86400
COLUMNS = "id, kind, state, attempts, run_at, started_at, finished_at, result, updated_at"
# Ids from awc.jobs' own sequence: a part has no default of its own.
ROWS = ("SELECT nextval(pg_get_serial_sequence('awc.jobs', 'id')), 'noop', 'COMPLETED', 1, "
        "now(), now(), {when}, 'null'::jsonb, now() FROM generate_series(1, %s)")


def left_behind(conn: Any, relation: str) -> dict[str, Any]:
    size = conn.execute("SELECT pg_total_relation_size(%s)", (relation,)).fetchone()[0]
    dead = conn.execute("SELECT dead_tuple_count FROM pgstattuple(%s)", (relation,)).fetchone()[0]
    return {"mib": round(size / 2**20, 1), "dead_tuples": int(dead)}


def by_parts(url: str, n: int) -> dict[str, Any]:
    with connect(url) as conn:
        reset(conn)
    with pinned_horizon(url), connect(url) as conn:
        current = conn.execute("SELECT slot FROM awc.done_parts WHERE current").fetchone()[0]
        nxt, after = (current + 1) % PARTS, (current + 2) % PARTS
        began = time.perf_counter()
        conn.execute(f"INSERT INTO awc.jobs_done_{nxt} ({COLUMNS}) "
                     + ROWS.format(when="now() - interval '8 days'"), (n,))
        # The retention's clock as it stands after a week of completions.
        conn.execute("UPDATE awc.done_parts SET began = now() - interval '2 days' WHERE current")
        conn.execute("UPDATE awc.done_parts SET began = now() - interval '8 days' "
                     "WHERE slot = %s", (after,))
        conn.commit()
        loaded = time.perf_counter() - began
        before = left_behind(conn, f"awc.jobs_done_{nxt}")
        began = time.perf_counter()
        removed = prune(conn, WEEK, force=True)
        secs = time.perf_counter() - began
        return {"secs": round(secs, 2), "removed": removed, "load_s": round(loaded, 1),
                "before": before, "after": left_behind(conn, f"awc.jobs_done_{nxt}"),
                "hot_table_after": left_behind(conn, "awc.jobs")}


def by_delete(url: str, n: int) -> dict[str, Any]:
    with connect(url) as conn:
        reset(conn)
    with pinned_horizon(url), connect(url) as conn:
        began = time.perf_counter()
        conn.execute(f"INSERT INTO awc.jobs ({COLUMNS}) "
                     + ROWS.format(when="now() - interval '8 days'"), (n,))
        conn.commit()
        loaded = time.perf_counter() - began
        before = left_behind(conn, "awc.jobs")
        began = time.perf_counter()
        removed = passes = 0
        while True:
            got = prune(conn, WEEK, force=True)
            removed, passes = removed + got, passes + 1
            if got == 0:
                break
        secs = time.perf_counter() - began
        return {"secs": round(secs, 2), "removed": removed, "passes": passes,
                "load_s": round(loaded, 1), "before": before,
                "after": left_behind(conn, "awc.jobs")}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--finished", type=int, default=5_000_000)
    parser.add_argument("--database-url", default=None,
                        help="a server to use instead of starting one (autovacuum on)")
    args = parser.parse_args(argv)
    with cluster(args.database_url) as (admin, server):
        url = bench_url(admin)
        with connect(url) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
            conn.commit()
        parts = by_parts(url, args.finished)
        delete = by_delete(url, args.finished)
        with connect(url) as conn:
            reset(conn)
            context = {"machine": machine(conn), "server": server,
                       "server_config": server_settings(conn), "finished": args.finished,
                       "holder": "REPEATABLE READ transaction open throughout"}
    figures = {"parts_secs": parts["secs"], "delete_secs": delete["secs"],
               "delete_over_parts": round(delete["secs"] / max(parts["secs"], 1e-3), 1),
               "parts": parts, "delete": delete}
    report("prune", figures, context)
    return figures


if __name__ == "__main__":
    main()
