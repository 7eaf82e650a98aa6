"""SPEC §10: the AWC kinds, run by real ticks against real stores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest
from psycopg.types.json import Jsonb
from tick.handlers.kinds.ttl import Step, next_step
from tick.handlers.producer import create_workspace, ensure_tenant, register_snapshot
from tick.handlers.runtime import runtime
from tick.handlers.stores.base import digest_of
from tick.handlers.trees import encode_tree, write_tree

from tests.support import TENANT, drain, job_row, snapshot_state
from tests.support import configure_handlers as configure
from tick.producer import enqueue

T = TENANT


# -- validation ---------------------------------------------------------------------


def test_validate_intact_tree_is_ready(env: Any, conn: psycopg.Connection[Any]) -> None:
    root = write_tree(env, T, {"a": "1", "d": {"b": "2"}})
    snap = register_snapshot(conn, T, root)
    report = drain(conn)
    assert report.completed == 1
    state, verdict = snapshot_state(conn, snap)
    assert state == "READY"
    assert verdict == {"closed": True, "objects": 4, "missing_count": 0, "corrupt_count": 0,
                       "missing": [], "corrupt": []}
    result = conn.execute("SELECT result FROM awc.jobs").fetchone()
    assert result is not None and result[0] == verdict


def test_validate_missing_blob_is_failed_naming_it(
    env: Any, conn: psycopg.Connection[Any]
) -> None:
    root = write_tree(env, T, {"a": "kept", "b": "lost"})
    env.delete(T, digest_of(b"lost"))
    snap = register_snapshot(conn, T, root)
    drain(conn)
    state, verdict = snapshot_state(conn, snap)
    assert state == "FAILED"
    assert verdict["missing"] == [digest_of(b"lost")] and verdict["missing_count"] == 1


def test_validate_corrupt_blob_is_failed_as_corrupt(
    env: Any, conn: psycopg.Connection[Any]
) -> None:
    root = write_tree(env, T, {"a": "original"})
    env.put_at(T, digest_of(b"original"), b"tampered")
    snap = register_snapshot(conn, T, root)
    drain(conn)
    state, verdict = snapshot_state(conn, snap)
    assert state == "FAILED" and verdict["corrupt"] == [digest_of(b"original")]


def test_validate_bounds_its_lists(env: Any, conn: psycopg.Connection[Any]) -> None:
    root = write_tree(env, T, {f"f{n}": f"blob {n}" for n in range(60)})
    for n in range(60):
        env.delete(T, digest_of(f"blob {n}".encode()))
    snap = register_snapshot(conn, T, root)
    drain(conn)
    _, verdict = snapshot_state(conn, snap)
    assert verdict["missing_count"] == 60 and len(verdict["missing"]) == 50


def test_validate_terminal_snapshot_is_skipped(env: Any, conn: psycopg.Connection[Any]) -> None:
    root = write_tree(env, T, {"a": "1"})
    snap = register_snapshot(conn, T, root, validate=False, state="READY")
    enqueue(conn, "snapshot_validate", {"snapshot_id": str(snap)})
    drain(conn)
    result = conn.execute("SELECT result FROM awc.jobs").fetchone()
    assert result is not None and result[0] == {"skipped": "READY"}


def test_validate_twice_is_harmless(env: Any, conn: psycopg.Connection[Any]) -> None:
    root = write_tree(env, T, {"a": "1"})
    snap = register_snapshot(conn, T, root, validate=False)
    for _ in range(2):
        enqueue(conn, "snapshot_validate", {"snapshot_id": str(snap)})
    drain(conn, concurrency=1)
    versions = conn.execute("SELECT state, version FROM awc.snapshots").fetchall()
    assert versions == [("READY", 1)]


def test_store_outage_is_a_retry_then_ready(
    db_url: str, conn: psycopg.Connection[Any], moto_s3: Any
) -> None:
    from tick.handlers.stores import open_store

    from tests.support import new_bucket, s3_settings

    settings = s3_settings(moto_s3, new_bucket(moto_s3))
    store = open_store(settings.cas_url, settings)
    ensure_tenant(conn, T)
    root = write_tree(store, T, {"a": "1", "b": "2"})
    snap = register_snapshot(conn, T, root)
    reads: list[str] = []

    class OutageMidWalk:
        """The S3 endpoint goes down once the walk has read the root tree."""

        def __getattr__(self, name: str) -> Any:
            return getattr(store, name)

        def chunks(self, tenant_id: str, digest: str) -> Any:
            if len(reads) == 1:
                moto_s3.stop()
            reads.append(digest)
            return store.chunks(tenant_id, digest)

    configure(db_url, OutageMidWalk())
    try:
        report = drain(conn)
    finally:
        moto_s3.restart()
    assert reads[0] == root and len(reads) == 2  # one object read, then the outage
    assert report.retried == 1
    configure(db_url, store)
    job = job_row(conn, 1)
    assert job["state"] == "PENDING" and job["last_error"].startswith("Retry: object store:")
    conn.execute("UPDATE awc.jobs SET run_at = now()")
    assert drain(conn).completed == 1
    assert snapshot_state(conn, snap)[0] == "READY"
    runtime().close()


# -- scrub ----------------------------------------------------------------------------


def test_scrub_decay_degrades_pins_survivors_and_audits(
    env: Any, conn: psycopg.Connection[Any]
) -> None:
    root = write_tree(env, T, {"a": "stays", "b": "decays", "c": "vanishes"})
    snap = register_snapshot(conn, T, root, validate=False, state="READY")
    env.put_at(T, digest_of(b"decays"), b"bit rot")
    env.delete(T, digest_of(b"vanishes"))
    enqueue(conn, "snapshot_scrub", {"snapshot_id": str(snap)})
    drain(conn)
    state, verdict = snapshot_state(conn, snap)
    assert state == "DEGRADED" and verdict["corrupt_count"] == 1 and verdict["missing_count"] == 1
    pins = {r[0] for r in conn.execute(
        "SELECT digest FROM awc.gc_pins WHERE snapshot_id = %s AND reason = 'degraded'",
        (snap,)).fetchall()}
    assert pins == {root, digest_of(b"stays")}
    events = conn.execute("SELECT event, subject, detail FROM awc.audit_events").fetchall()
    assert events == [("snapshot.scrub", str(snap), verdict)]


def test_scrub_intact_stays_ready_and_audits(env: Any, conn: psycopg.Connection[Any]) -> None:
    root = write_tree(env, T, {"a": "1"})
    snap = register_snapshot(conn, T, root, validate=False, state="READY")
    job_id = enqueue(conn, "snapshot_scrub", {"snapshot_id": str(snap)})
    drain(conn)
    assert snapshot_state(conn, snap)[0] == "READY"
    assert conn.execute("SELECT count(*) FROM awc.audit_events").fetchone() == (1,)
    # The same job run again records its audit event once. A completed job
    # is final (it sits in a finished part, SPEC §24): it comes back under
    # its own id as a new row, as a rerun after a lost completion would.
    kind, payload = conn.execute("DELETE FROM awc.jobs WHERE id = %s RETURNING kind, payload",
                                 (job_id,)).fetchone() or (None, None)
    conn.execute("INSERT INTO awc.jobs (id, kind, payload) VALUES (%s, %s, %s)",
                 (job_id, kind, Jsonb(payload)))
    drain(conn)
    assert conn.execute("SELECT count(*) FROM awc.audit_events").fetchone() == (1,)


# -- expiry -------------------------------------------------------------------------

NOW = datetime(2026, 1, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


@pytest.mark.parametrize(
    ("state", "expires_at", "since", "expected"),
    [
        ("ACTIVE", NOW - HOUR, None, Step("EXPIRING", NOW)),
        ("ACTIVE", NOW + HOUR, None, None),
        ("EXPIRING", NOW + HOUR, NOW - HOUR, Step("ACTIVE", None)),
        ("EXPIRING", NOW - HOUR, NOW - 2 * HOUR, Step("EXPIRED", NOW - 2 * HOUR)),
        ("EXPIRING", NOW - HOUR, NOW - HOUR / 2, None),
        ("EXPIRED", NOW - HOUR, NOW - 9 * HOUR, None),
        # A row of plain SQL, EXPIRING with no start: its grace starts now,
        # written down (it started anew at every run, and never expired).
        ("EXPIRING", NOW - HOUR, None, Step("EXPIRING", NOW)),
    ],
)
def test_ttl_machine(state: str, expires_at: datetime, since: datetime | None,
                     expected: Step | None) -> None:
    assert next_step(state, expires_at, since, NOW, HOUR) == expected


def _workspace(conn: psycopg.Connection[Any], state: str, expires_in: timedelta,
               since_ago: timedelta | None = None) -> UUID:
    ws = create_workspace(conn, T, datetime.now(UTC) + expires_in)
    since = None if since_ago is None else datetime.now(UTC) - since_ago
    conn.execute("UPDATE awc.workspaces SET state = %s, expiring_since = %s WHERE id = %s",
                 (state, since, ws))
    return ws


@pytest.mark.parametrize("store_kind", ["memory"])
@pytest.mark.parametrize(
    ("state", "expires_in", "since_ago", "after"),
    [
        ("ACTIVE", -HOUR, None, "EXPIRING"),
        ("ACTIVE", HOUR, None, "ACTIVE"),
        ("EXPIRING", HOUR, timedelta(seconds=5), "ACTIVE"),
        ("EXPIRING", -HOUR, timedelta(seconds=61), "EXPIRED"),
        ("EXPIRING", -HOUR, timedelta(seconds=5), "EXPIRING"),
        ("EXPIRED", -HOUR, timedelta(days=1), "EXPIRED"),
    ],
)
def test_workspace_expire_steps(env: Any, conn: psycopg.Connection[Any], state: str,
                                expires_in: timedelta, since_ago: timedelta | None,
                                after: str) -> None:
    ws = _workspace(conn, state, expires_in, since_ago)
    enqueue(conn, "workspace_expire", {"workspace_id": str(ws)})
    assert drain(conn).completed == 1
    row = conn.execute("SELECT state, expiring_since, version FROM awc.workspaces").fetchone()
    assert row is not None and row[0] == after
    assert row[2] == (0 if after == state else 1)
    if after == "EXPIRING" and state == "ACTIVE":
        assert row[1] is not None
    if after == "ACTIVE":
        assert row[1] is None



@pytest.mark.parametrize("store_kind", ["memory"])
@pytest.mark.parametrize("since", ["-infinity", "4713-01-01 00:00:00+00 BC",
                                   "2026-01-01 00:00:00+00"])
def test_expiry_keeps_the_start_of_its_grace_as_stored(
        env: Any, conn: psycopg.Connection[Any], since: str) -> None:
    """An EXPIRING workspace past its grace becomes EXPIRED with the
    `expiring_since` it had, not that instant as Python read it (`-infinity`
    and dates before the year 1 were written back as the year 1)."""
    ws = _workspace(conn, "EXPIRING", -HOUR)
    conn.execute("UPDATE awc.workspaces SET expiring_since = %s::timestamptz WHERE id = %s",
                 (since, ws))
    enqueue(conn, "workspace_expire", {"workspace_id": str(ws)})
    assert drain(conn).completed == 1
    assert conn.execute("SELECT state, expiring_since = %s::timestamptz FROM awc.workspaces "
                        "WHERE id = %s", (since, ws)).fetchone() == ("EXPIRED", True)


@pytest.mark.parametrize("store_kind", ["memory"])
def test_a_record_at_the_last_version_moves_on(env: Any, conn: psycopg.Connection[Any]) -> None:
    """The compare-and-set added one to `version`, which failed at an
    integer's last value: the job was retried until its attempts ran out."""
    ws = _workspace(conn, "ACTIVE", -HOUR)
    conn.execute("UPDATE awc.workspaces SET version = 2147483647")
    enqueue(conn, "workspace_expire", {"workspace_id": str(ws)})
    assert drain(conn).completed == 1
    assert conn.execute("SELECT state, version FROM awc.workspaces").fetchone() == (
        "EXPIRING", -2147483648)
    snap = _snap(conn, None, "VALIDATING", 0)
    conn.execute("UPDATE awc.snapshots SET version = 2147483647, root_digest = %s",
                 (env.put(T, encode_tree([])),))
    enqueue(conn, "snapshot_validate", {"snapshot_id": str(snap)})
    assert drain(conn).completed == 1
    assert conn.execute("SELECT state, version FROM awc.snapshots").fetchone() == (
        "READY", -2147483648)

# -- retention ----------------------------------------------------------------------


def _snap(conn: psycopg.Connection[Any], ws: UUID | None, state: str, age_min: int) -> UUID:
    row = conn.execute(
        "INSERT INTO awc.snapshots (tenant_id, workspace_id, root_digest, state, created_at) "
        "VALUES (%s, %s, %s, %s, now() - make_interval(mins => %s)) RETURNING id",
        (T, ws, digest_of(str(uuid4()).encode()), state, age_min)).fetchone()
    assert row is not None
    return UUID(str(row[0]))


@pytest.mark.parametrize("store_kind", ["memory"])
def test_retention_honours_keep_last(env: Any, conn: psycopg.Connection[Any]) -> None:
    ws = create_workspace(conn, T, datetime.now(UTC) + HOUR, keep_last=3)
    snaps = [_snap(conn, ws, "READY", age) for age in range(10)]  # snaps[0] newest
    degraded = _snap(conn, ws, "DEGRADED", 100)
    pinned = _snap(conn, ws, "READY", 200)
    conn.execute("INSERT INTO awc.gc_pins (tenant_id, digest, snapshot_id, reason) "
                 "VALUES (%s, %s, %s, 'hold')", (T, digest_of(b"p"), pinned))
    for snap in [*snaps, degraded, pinned]:
        enqueue(conn, "snapshot_retain", {"snapshot_id": str(snap)})
    assert drain(conn).completed == 12
    states = dict(conn.execute("SELECT id, state FROM awc.snapshots").fetchall())
    assert [states[s] for s in snaps] == ["READY"] * 3 + ["DELETED"] * 7
    assert (states[degraded], states[pinned]) == ("DEGRADED", "READY")


@pytest.mark.parametrize("store_kind", ["memory"])
def test_retention_deletes_snapshots_of_an_expired_workspace(
    env: Any, conn: psycopg.Connection[Any]
) -> None:
    ws = _workspace(conn, "EXPIRED", -HOUR, timedelta(days=2))
    ready, degraded = _snap(conn, ws, "READY", 1), _snap(conn, ws, "DEGRADED", 2)
    for snap in (ready, degraded):
        enqueue(conn, "snapshot_retain", {"snapshot_id": str(snap)})
    drain(conn)
    states = dict(conn.execute("SELECT id, state FROM awc.snapshots").fetchall())
    assert (states[ready], states[degraded]) == ("DELETED", "DEGRADED")


# -- bad input ------------------------------------------------------------------------


@pytest.mark.parametrize("store_kind", ["memory"])
def test_bad_payloads_and_missing_ids_are_dead_lettered(
    env: Any, conn: psycopg.Connection[Any]
) -> None:
    cases = {
        "snapshot_validate": {"snapshot_id": "not-a-uuid"},
        "snapshot_scrub": {"snapshot_id": str(uuid4()), "extra": 1},
        "gc_sweep": {"tenant_id": "../etc"},
        "prune": {"anything": True},
    }
    bad = {kind: enqueue(conn, kind, payload) for kind, payload in cases.items()}
    ghost = uuid4()
    missing = {
        "snapshot_retain": enqueue(conn, "snapshot_retain", {"snapshot_id": str(ghost)}),
        "workspace_expire": enqueue(conn, "workspace_expire", {"workspace_id": str(ghost)}),
        "gc_sweep": enqueue(conn, "gc_sweep", {"tenant_id": "nobody"}),
    }
    report = drain(conn)
    assert report.failed == len(cases) + len(missing)
    for job_id in bad.values():
        job = job_row(conn, job_id)
        assert (job["state"], job["attempts"]) == ("FAILED", 1)
        assert job["last_error"].startswith("ValidationError: ")
    assert job_row(conn, missing["snapshot_retain"])["last_error"] == (
        f"Fail: snapshot {ghost} does not exist")
    assert job_row(conn, missing["workspace_expire"])["last_error"] == (
        f"Fail: workspace {ghost} does not exist")
    gc_error = job_row(conn, missing["gc_sweep"])["last_error"]
    assert gc_error == "Fail: tenant 'nobody' does not exist"


@pytest.mark.parametrize("store_kind", ["memory"])
def test_prune_kind_prunes_old_jobs(env: Any, conn: psycopg.Connection[Any]) -> None:
    old = enqueue(conn, "noop")
    conn.execute("UPDATE awc.jobs SET state = 'COMPLETED', finished_at = now() - "
                 "interval '30 days' WHERE id = %s", (old,))
    # The tick's own hourly prune has just run, so only the job prunes.
    conn.execute("UPDATE awc.maintenance SET last_run_at = now() WHERE step = 'prune'")
    job_id = enqueue(conn, "prune")
    drain(conn)
    assert job_row(conn, job_id)["result"] == {"pruned": 1}
