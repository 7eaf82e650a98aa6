"""`awc demo` (SPEC §13): awc end to end with no setting at all.

Starts an embedded PostgreSQL in `<dir>/pg` (or uses `--database-url`),
recreates the `awc_demo` database, writes a tenant's snapshots into a
`file://` store in `<dir>/store` (some intact, one with a missing object,
one that decays before its scrub), enqueues one job of each built-in kind,
ticks until the queue is drained, and prints what happened.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from pydantic import SecretStr

from tick.db import connect
from tick.engine import Engine, RunSpec
from tick.migrate import migrate
from tick.queue import enqueue
from tick.run_once import maintenance_for
from tick.settings import Settings

if TYPE_CHECKING:
    from handlers.trees import TreeSpec

TENANT = "acme"
DEMO_DB = "awc_demo"


def _database(directory: Path, database_url: str | None) -> tuple[str, Any]:
    """A connection string to a fresh `awc_demo` database, and the server."""
    from psycopg.conninfo import make_conninfo

    server = None
    if database_url is None:
        from tick.embedded import EmbeddedPostgres

        server = EmbeddedPostgres(directory / "pg", keep=True)
        admin_url = server.start()
    else:
        admin_url = database_url
    with connect(admin_url) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DEMO_DB} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {DEMO_DB}")
    return make_conninfo(admin_url, dbname=DEMO_DB), server


def _seed(conn: Any, store: Any) -> dict[str, Any]:
    """A tenant, two workspaces, four snapshots and one orphan object.

    New snapshots go through the producer API (`handlers.producer.upload`),
    which also enqueues their validation; two older READY snapshots stand for
    the control plane's history.
    """
    from handlers.producer import create_workspace, ensure_tenant, upload
    from handlers.trees import write_tree

    ensure_tenant(conn, TENANT)
    now = datetime.now(UTC)
    active = create_workspace(conn, TENANT, now + timedelta(days=30), keep_last=1)
    lapsed = create_workspace(conn, TENANT, now - timedelta(minutes=5))

    def history(root: str, age_min: int) -> Any:
        row = conn.execute(
            "INSERT INTO awc.snapshots (tenant_id, workspace_id, root_digest, state, created_at) "
            "VALUES (%s, %s, %s, 'READY', now() - make_interval(mins => %s)) RETURNING id",
            (TENANT, active, root, age_min)).fetchone()
        return row[0]

    superseded = history(write_tree(store, TENANT, {"index.html": "<h1>old</h1>"}), 60)
    decaying = history(write_tree(store, TENANT, {"report.csv": "a,b\n1,2\n", "readme": "v1"}), 10)
    site: TreeSpec = {"index.html": "<h1>hello</h1>", "assets": {"app.js": "console.log(1)"}}
    _, broken = upload(conn, store, TENANT, {"data.bin": b"\x00" * 64, "notes.txt": "gone soon"},
                       active)
    _, intact = upload(conn, store, TENANT, site, active)
    store.delete(TENANT, _blob_digest("gone soon"))  # lost before validation
    store.put(TENANT, b"an object no snapshot references")
    # Decay: the store now holds other bytes under one of its digests.
    store.put_at(TENANT, _blob_digest("v1"), b"bit rot")
    return {
        "snapshots": {"intact": intact, "missing-object": broken,
                      "decays-before-scrub": decaying, "superseded": superseded},
        "workspaces": {"active (keep_last=1)": active, "lapsed": lapsed},
    }


def _blob_digest(text: str) -> str:
    from handlers.store import digest_of

    return digest_of(text.encode())


def _enqueue_all(conn: Any, seeded: dict[str, Any]) -> None:
    # The two snapshot_validate jobs were enqueued by the uploads.
    snaps, spaces = seeded["snapshots"], seeded["workspaces"]
    enqueue(conn, "snapshot_scrub", {"snapshot_id": str(snaps["decays-before-scrub"])}, priority=9)
    enqueue(conn, "workspace_expire", {"workspace_id": str(spaces["lapsed"])}, priority=9)
    enqueue(conn, "snapshot_retain", {"snapshot_id": str(snaps["superseded"])}, priority=-1)
    enqueue(conn, "gc_sweep", {"tenant_id": TENANT}, priority=-2)
    enqueue(conn, "prune", {}, priority=-3)


def _summary(result: Any) -> str:
    if not isinstance(result, dict):
        return "-" if result is None else str(result)
    if "closed" in result:
        return (f"closed={result['closed']} objects={result['objects']} "
                f"missing={result['missing_count']} corrupt={result['corrupt_count']}")
    return " ".join(f"{k}={v}" for k, v in result.items())


def _table(title: str, header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    grid = [header] + [tuple("-" if v is None else str(v) for v in row) for row in rows]
    widths = [max(len(r[i]) for r in grid) for i in range(len(header))]
    click.echo(f"\n{title}")
    for n, row in enumerate(grid):
        click.echo("  " + "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            click.echo("  " + "  ".join("-" * w for w in widths))


def run_demo(directory: str, database_url: str | None) -> None:
    """The whole demo; rerunnable (the database and the store are made anew)."""
    import handlers
    from handlers.store import open_store

    began = time.monotonic()
    root = Path(directory).expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    store_dir = root / "store"
    shutil.rmtree(store_dir, ignore_errors=True)
    click.echo(f"awc demo in {root}")
    dsn, server = _database(root, database_url)
    try:
        settings = Settings(database_url=SecretStr(dsn), cas_url=f"file://{store_dir}",
                            retention_grace_secs=3600, gc_grace_secs=0, gc_canary_size=1)
        store = open_store(settings.cas_url or "", settings)
        with connect(dsn) as conn:
            migrate(conn)
            click.echo("PostgreSQL ready, schema migrated; writing a tenant's snapshots")
            seeded = _seed(conn, store)
            before = sum(1 for _ in store.list(TENANT))
            handlers.configure(settings, store)
            _enqueue_all(conn, seeded)
            engine = Engine(conn, worker_id="awc-demo",
                            maintenance=maintenance_for(settings.prune_after_secs))
            ticks = 0
            while True:
                # One job at a time, by priority, so GC sweeps what retention dropped.
                spec = RunSpec(max_jobs=100, deadline=time.monotonic() + 30, concurrency=1)
                report = engine.run(spec)
                ticks += 1
                if report.claimed == 0:
                    break
            _report(conn, seeded, before, sum(1 for _ in store.list(TENANT)), ticks)
        click.echo(f"\ndone in {time.monotonic() - began:.1f}s; rerun any time "
                   f"(`awc demo --dir {directory}`)")
    finally:
        from handlers.runtime import runtime

        with contextlib.suppress(RuntimeError):  # never configured: nothing to close
            runtime().close()
        if server is not None:
            server.stop()


def _report(conn: Any, seeded: dict[str, Any], before: int, after: int, ticks: int) -> None:
    jobs = conn.execute(
        "SELECT id, kind, state, attempts, result, last_error FROM awc.jobs ORDER BY id"
    ).fetchall()
    _table(f"Jobs (drained in {ticks} ticks)", ("id", "kind", "state", "attempts", "outcome"),
           [(i, k, s, a, _summary(r) if s == "COMPLETED" else e) for i, k, s, a, r, e in jobs])
    names = {v: k for k, v in seeded["snapshots"].items()}
    snaps = conn.execute("SELECT id, state, verdict FROM awc.snapshots ORDER BY created_at DESC"
                         ).fetchall()
    _table("Snapshots", ("snapshot", "state", "verdict"),
           [(names[i], s, _summary(v)) for i, s, v in snaps])
    spaces = {v: k for k, v in seeded["workspaces"].items()}
    rows = conn.execute("SELECT id, state, expiring_since FROM awc.workspaces").fetchall()
    _table("Workspaces", ("workspace", "state", "expiring since"),
           [(spaces[i], s, since and since.strftime("%H:%M:%S")) for i, s, since in rows])
    epochs = conn.execute("SELECT id, state, marked, candidates, deleted FROM awc.gc_epochs"
                          ).fetchall()
    _table("GC epochs", ("epoch", "state", "marked", "candidates", "deleted"), epochs)
    pins = conn.execute("SELECT count(*) FROM awc.gc_pins").fetchone()
    audits = conn.execute("SELECT count(*) FROM awc.audit_events").fetchone()
    click.echo(f"\nObjects in the store: {before} before, {after} after GC; "
               f"{pins[0] if pins else 0} pinned by scrub; "
               f"{audits[0] if audits else 0} audit events")
