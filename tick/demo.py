"""`awc demo` (SPEC §13): awc end to end with no setting at all.

Starts an embedded PostgreSQL in `<dir>/pg` and recreates its own `awc_demo`
database there, writes a tenant's snapshots into a `file://` store in
`<dir>/store` (some intact, one with a missing object, one that decays before
its scrub), enqueues one job of each built-in kind, ticks until the queue is
drained, and prints what happened.

With `--database-url` the demo works in exactly the database named, and only
on what it creates: a tenant and a queue of its own (`demo-<random>`), no
maintenance pass, and no `prune` job (which would delete that database's own
finished jobs). It drops, empties and overwrites nothing.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tick.db import connect, database_now
from tick.drivers.compose import engine_for, tick_spec
from tick.errors import AwcError
from tick.events import NullEvents
from tick.migrate import migrate
from tick.producer import enqueue
from tick.settings import load_settings

if TYPE_CHECKING:
    from tick.handlers.trees import TreeSpec

DEMO_DB = "awc_demo"


def _embedded_database(directory: Path) -> tuple[str, Any]:
    """A fresh `awc_demo` database on the demo's own embedded server."""
    from psycopg.conninfo import make_conninfo

    from tick.embedded import EmbeddedPostgres

    server = EmbeddedPostgres(directory / "pg", keep=True)
    admin_url = server.start()
    with connect(admin_url) as admin:
        # The demo's own server and database: safe to make anew.
        admin.execute(f"DROP DATABASE IF EXISTS {DEMO_DB} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {DEMO_DB}")
    return make_conninfo(admin_url, dbname=DEMO_DB), server


def _seed(conn: Any, store: Any, tenant: str, queue: str) -> dict[str, Any]:
    """A tenant, two workspaces, four snapshots and one orphan object.

    New snapshots go through the producer API (`tick.handlers.producer.upload`),
    and their validation is enqueued on the demo's queue; two older READY
    snapshots stand for the control plane's history.
    """
    from tick.handlers.producer import create_workspace, ensure_tenant, upload
    from tick.handlers.trees import write_tree

    ensure_tenant(conn, tenant)
    now = database_now(conn)  # "lapsed" by the clock workspace_expire compares with
    active = create_workspace(conn, tenant, now + timedelta(days=30), keep_last=1)
    lapsed = create_workspace(conn, tenant, now - timedelta(minutes=5))

    def history(root: str, age_min: int) -> Any:
        row = conn.execute(
            "INSERT INTO awc.snapshots (tenant_id, workspace_id, root_digest, state, created_at) "
            "VALUES (%s, %s, %s, 'READY', now() - make_interval(mins => %s)) RETURNING id",
            (tenant, active, root, age_min)).fetchone()
        return row[0]

    superseded = history(write_tree(store, tenant, {"index.html": "<h1>old</h1>"}), 60)
    decaying = history(write_tree(store, tenant, {"report.csv": "a,b\n1,2\n", "readme": "v1"}), 10)
    site: TreeSpec = {"index.html": "<h1>hello</h1>", "assets": {"app.js": "console.log(1)"}}
    _, broken = upload(conn, store, tenant, {"data.bin": b"\x00" * 64, "notes.txt": "gone soon"},
                       active, validate=False)
    _, intact = upload(conn, store, tenant, site, active, validate=False)
    for snapshot in (broken, intact):
        enqueue(conn, "snapshot_validate", {"snapshot_id": str(snapshot)}, queue=queue)
    store.delete(tenant, _blob_digest("gone soon"))  # lost before validation
    store.put(tenant, b"an object no snapshot references")
    # Decay: the store now holds other bytes under one of its digests.
    store.put_at(tenant, _blob_digest("v1"), b"bit rot")
    return {
        "snapshots": {"intact": intact, "missing-object": broken,
                      "decays-before-scrub": decaying, "superseded": superseded},
        "workspaces": {"active (keep_last=1)": active, "lapsed": lapsed},
    }


def _blob_digest(text: str) -> str:
    from tick.handlers.stores.base import digest_of

    return str(digest_of(text.encode()))


def _enqueue_all(conn: Any, seeded: dict[str, Any], tenant: str, queue: str,
                 prune: bool) -> None:
    # The two snapshot_validate jobs were enqueued with the uploads.
    snaps, spaces = seeded["snapshots"], seeded["workspaces"]
    enqueue(conn, "snapshot_scrub", {"snapshot_id": str(snaps["decays-before-scrub"])},
            priority=9, queue=queue)
    enqueue(conn, "workspace_expire", {"workspace_id": str(spaces["lapsed"])}, priority=9,
            queue=queue)
    enqueue(conn, "snapshot_retain", {"snapshot_id": str(snaps["superseded"])}, priority=-1,
            queue=queue)
    enqueue(conn, "gc_sweep", {"tenant_id": tenant}, priority=-2, queue=queue)
    if prune:
        enqueue(conn, "prune", {}, priority=-3, queue=queue)


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
    import tick.handlers as handlers
    from tick.handlers.stores import open_store

    began = time.monotonic()
    load_settings()  # every command validates the environment first (SPEC §2)
    root = Path(directory).expanduser().resolve()
    store_dir = root / "store"
    if database_url is not None:
        from tick.db import check_dsn

        dsn = check_dsn(database_url, "--database-url")
        with connect(dsn) as conn:  # refused (unreachable, replica mode) before any file
            migrate(conn)
    try:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(store_dir, ignore_errors=True)
        store_dir.mkdir()
    except OSError as error:
        raise AwcError(f"--dir: cannot use {root} ({error.strerror or error})") from None
    click.echo(f"awc demo in {root}")
    server = None
    if database_url is None:
        dsn, server = _embedded_database(root)
        tenant, queue, own_database = "acme", "default", True
    else:
        mark = secrets.token_hex(4)
        tenant, queue, own_database = f"demo-{mark}", f"demo-{mark}", False
    try:
        # One job at a time, by priority, so GC sweeps what retention dropped.
        settings = load_settings(database_url=dsn, cas_url=f"file://{store_dir}",
                                 retention_grace_secs=3600, gc_grace_secs=0, gc_canary_size=1,
                                 gc_dry_run=False, worker_id="awc-demo", worker_concurrency=1,
                                 tick_max_jobs=100)
        store = open_store(settings.require_cas_url(), settings)
        with connect(dsn) as conn:
            migrate(conn)
            click.echo("PostgreSQL ready, schema migrated; writing a tenant's snapshots")
            seeded = _seed(conn, store, tenant, queue)
            before = sum(1 for _ in store.list(tenant))
            handlers.configure(settings, store)
            _enqueue_all(conn, seeded, tenant, queue, prune=own_database)
            # Maintenance (rescue, prune) acts on every job in the database:
            # only in the demo's own database.
            engine = engine_for(settings, conn, events=NullEvents(), maintenance=own_database)
            ticks = 0
            while True:
                spec = tick_spec(settings, deadline=time.monotonic() + 30, queues=[queue])
                report = engine.run(spec)
                ticks += 1
                if report.claimed == 0:
                    break
            _report(conn, seeded, tenant, queue, before, sum(1 for _ in store.list(tenant)),
                    ticks)
        if not own_database:
            click.echo(f"\nworked in the named database only on tenant and queue {tenant!r}; "
                       "no prune job (it would delete that database's finished jobs)")
        click.echo(f"\ndone in {time.monotonic() - began:.1f}s; rerun any time "
                   f"(`awc demo --dir {directory}`)")
    finally:
        from tick.handlers.runtime import runtime

        with contextlib.suppress(RuntimeError):  # never configured: nothing to close
            runtime().close()
        if server is not None:
            server.stop()


def _report(conn: Any, seeded: dict[str, Any], tenant: str, queue: str, before: int,
            after: int, ticks: int) -> None:
    jobs = conn.execute(
        "SELECT id, kind, state, attempts, result, last_error FROM awc.jobs "
        "WHERE queue = %s ORDER BY id", (queue,)).fetchall()
    _table(f"Jobs (drained in {ticks} ticks)", ("id", "kind", "state", "attempts", "outcome"),
           [(i, k, s, a, _summary(r) if s == "COMPLETED" else e) for i, k, s, a, r, e in jobs])
    names = {v: k for k, v in seeded["snapshots"].items()}
    snaps = conn.execute("SELECT id, state, verdict FROM awc.snapshots WHERE tenant_id = %s "
                         "ORDER BY created_at DESC", (tenant,)).fetchall()
    _table("Snapshots", ("snapshot", "state", "verdict"),
           [(names[i], s, _summary(v)) for i, s, v in snaps])
    spaces = {v: k for k, v in seeded["workspaces"].items()}
    rows = conn.execute("SELECT id, state, expiring_since FROM awc.workspaces "
                        "WHERE tenant_id = %s", (tenant,)).fetchall()
    _table("Workspaces", ("workspace", "state", "expiring since"),
           [(spaces[i], s, since and since.strftime("%H:%M:%S")) for i, s, since in rows])
    epochs = conn.execute("SELECT id, state, marked, candidates, deleted FROM awc.gc_epochs "
                          "WHERE tenant_id = %s", (tenant,)).fetchall()
    _table("GC epochs", ("epoch", "state", "marked", "candidates", "deleted"), epochs)
    pins = conn.execute("SELECT count(*) FROM awc.gc_pins WHERE tenant_id = %s",
                        (tenant,)).fetchone()
    audits = conn.execute("SELECT count(*) FROM awc.audit_events WHERE tenant_id = %s",
                          (tenant,)).fetchone()
    click.echo(f"\nObjects in the store: {before} before, {after} after GC; "
               f"{pins[0] if pins else 0} pinned by scrub; "
               f"{audits[0] if audits else 0} audit events")
