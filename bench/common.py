"""Shared by the benchmarks: the PostgreSQL they run against, the machine
they ran on, and where results go.

Every benchmark names its server: `BENCH_DATABASE_URL`, else `DATABASE_URL`,
else the local service at postgresql://postgres@127.0.0.1:5432/postgres. It
creates (or reuses) the database `awc_bench` there and migrates it.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tick.db import connect
from tick.migrate import migrate
from tick.redaction import redact

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
BENCH_DB = "awc_bench"


def server_url() -> str:
    return os.environ.get("BENCH_DATABASE_URL") or os.environ.get("DATABASE_URL") or DEFAULT_SERVER


def bench_url(admin: str | None = None, database: str = BENCH_DB) -> str:
    """A migrated `awc_bench` database (or `database`) on the named server (or
    on `admin`'s, for a bench that starts a server of its own: bench.horizon)."""
    admin = admin or server_url()
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,))
        if exists.fetchone() is None:
            conn.execute(f'CREATE DATABASE "{database}"')
    url = make_conninfo(admin, dbname=database)
    with connect(url) as conn:
        migrate(conn)
    return url


def reset(conn: psycopg.Connection[Any]) -> None:
    """An empty queue with fresh statistics, as after a deploy. The tables
    an older awc lacks (its database migrated by that awc: install_before)
    are left out."""
    row = conn.execute(
        "SELECT string_agg(t, ', ') FROM unnest(ARRAY['awc.jobs', 'awc.job_parents', "
        "'awc.walk_marks']) AS t WHERE to_regclass(t) IS NOT NULL").fetchone()
    conn.execute(f"TRUNCATE {row[0] if row else 'awc.jobs'} RESTART IDENTITY")
    conn.execute("UPDATE awc.maintenance SET last_run_at = now()")  # no prune mid-run
    conn.execute("VACUUM ANALYZE awc.jobs")
    conn.execute("CHECKPOINT")


def machine(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """The machine and server a figure was measured on."""
    memory = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) // 1024 // 1024} GiB"
    except OSError:
        pass
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    settings = dict(conn.execute(
        "SELECT name, setting FROM pg_settings WHERE name IN "
        "('fsync', 'synchronous_commit', 'shared_buffers', 'full_page_writes')").fetchall())
    version = conn.execute("SHOW server_version").fetchone()
    target = conninfo_to_dict(conn.info.dsn)
    return {
        "cores": os.cpu_count(),
        "memory": memory,
        "cpu": cpu,
        "python": sys.version.split()[0],
        "postgresql": version[0] if version else "unknown",
        "server": redact(f"{target.get('host', 'socket')}:{target.get('port', '5432')}"),
        "server_settings": settings,
    }


def report(name: str, figures: dict[str, Any], context: dict[str, Any]) -> None:
    """Print the figures and their context, and write bench/results/<name>.json."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    data = {"benchmark": name, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **figures, "context": context}
    (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    print(f"== {name}")
    for key, value in figures.items():
        print(f"  {key}: {value}")
    m = context["machine"]
    print(f"  machine: {m['cores']} cores, {m['memory']}, {m['cpu']}; Python {m['python']}")
    print(f"  postgresql: {m['postgresql']} at {m['server']} {m['server_settings']}")
    extra = {k: v for k, v in context.items() if k != "machine"}
    if extra:
        print(f"  settings: {extra}")
    print(f"  written: {RESULTS / (name + '.json')}")


def median(values: Iterable[float]) -> float:
    return float(statistics.median(list(values)))


def enqueue_noops(conn: psycopg.Connection[Any], n: int, batch: int = 10_000,
                  kind: str = "noop") -> None:
    """`n` jobs of `kind` (bench.kinds) with no payload."""
    from tick.producer import enqueue_many

    for start in range(0, n, batch):
        enqueue_many(conn, [{"kind": kind}] * min(batch, n - start))


@contextmanager
def checkout_at(rev: str, tree: Path) -> Iterator[Path]:
    """This repository at `rev`, checked out at `tree` while the block runs."""
    subprocess.run(["git", "worktree", "add", "--detach", "--force", str(tree), rev], cwd=ROOT,
                   check=True, capture_output=True)
    try:
        yield tree
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT,
                       capture_output=True)


def install_before(rev: str, into: Path) -> str:
    """awc at `rev`, laid out as its wheel installs it (tick/, with the
    repository's migrations/ and handlers/ inside: docs/decisions/0008) in a
    directory of its own."""
    import shutil

    with checkout_at(rev, into / "tree") as tree:
        site = into / "site"
        shutil.copytree(tree / "tick", site / "tick")
        shutil.copytree(tree / "migrations", site / "tick" / "migrations")
        shutil.copytree(tree / "handlers", site / "tick" / "handlers")
    return str(site)


def rev_before_adding(path: str, bench: str) -> str:
    """The mainline commit before the one that added `path` (what `bench`
    compares with, unless given --before): on the first-parent history, so a
    feature merged from a branch is compared with main just before its merge,
    not with wherever its branch began (and a file renamed at the merge is
    still found)."""
    added = subprocess.run(
        ["git", "log", "--first-parent", "-m", "--diff-filter=A", "--format=%H", "--", path],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    if not added:
        raise SystemExit(f"bench.{bench}: no commit adds {path}; give --before")
    return f"{added[-1]}^"


def before_url(site: str, name: str, admin: str | None = None) -> str:
    """A fresh database `name` (on `admin`'s server, by default the bench's)
    migrated by the awc installed at `site`."""
    url = _new_database(admin or server_url(), name)
    subprocess.run([sys.executable, "-c", "import sys; from tick.db import connect; "
                    "from tick.migrate import migrate; migrate(connect(sys.argv[1]))", url],
                   env=site_env(site, {"PATH": "/usr/bin:/bin"}), check=True)
    return url


def fresh_database(admin: str, name: str) -> str:
    """A fresh database `name` on `admin`'s server, migrated by this checkout."""
    from tick.db import connect
    from tick.migrate import migrate

    url = _new_database(admin, name)
    with connect(url) as conn:
        migrate(conn)
    return url


def _new_database(admin: str, name: str) -> str:
    """An empty database `name` on `admin`'s server (one left by an earlier
    run is dropped, its sessions ended); its URL."""
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    return make_conninfo(admin, dbname=name)


def site_env(site: str | None, env: dict[str, str]) -> dict[str, str]:
    """`env` for a Python process that imports awc from `site` (None: this
    checkout), then this checkout (bench.kinds). PYTHONSAFEPATH: `python -c`
    and `python -m` put the working directory first on sys.path, ahead of
    PYTHONPATH, and run in this checkout they would import its tick instead
    of the one at `site` (tests/test_bench_before.py)."""
    path = str(ROOT) if site is None else f"{site}{os.pathsep}{ROOT}"
    return {**env, "PYTHONPATH": path, "PYTHONSAFEPATH": "1"}


def timed_process(argv: list[str], *, timeout: float = 60, **popen: Any) -> tuple[float, int]:
    """Seconds from a process's start to its exit, and its exit code.

    `subprocess.run(..., timeout=)` waits by polling the child with sleeps
    that grow to 50 ms, so it timed a 0.3 s process in steps of 50 ms (an
    empty tick and `import psycopg` alike read 0.316, 0.366 or 0.416 s).
    This waits in `waitpid` itself, and a timer kills a child that overruns."""
    import threading

    began = time.perf_counter()
    with subprocess.Popen(argv, **popen) as child:
        killer = threading.Timer(timeout, child.kill)
        killer.start()
        try:
            code = child.wait()
        finally:
            killer.cancel()
        took = time.perf_counter() - began
    return took, code
