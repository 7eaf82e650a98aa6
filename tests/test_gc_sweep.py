"""SPEC §10.5: gc_sweep, one durable GC epoch per tenant, run by real ticks
against every store."""


from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest
from tick.handlers.producer import register_snapshot
from tick.handlers.stores.base import digest_of
from tick.handlers.trees import write_tree

from tests.support import TENANT, backdate, drain, wait_for
from tests.support import configure_handlers as configure
from tick.db import connect
from tick.producer import enqueue

T = TENANT


# -- garbage collection -----------------------------------------------------------------


def _objects(store: Any) -> set[str]:
    return {o.digest for o in store.list(T)}


def test_gc_deletes_old_unreachable_objects_only(
    env: Any, conn: psycopg.Connection[Any]
) -> None:
    live = write_tree(env, T, {"keep": "live data", "sub": {"deep": "also live"}})
    register_snapshot(conn, T, live, validate=False, state="READY")
    dead_root = write_tree(env, T, {"old": "dead data"})
    register_snapshot(conn, T, dead_root, validate=False, state="DELETED")
    orphan = env.put(T, b"orphan")
    pinned = env.put(T, b"pinned")
    conn.execute("INSERT INTO awc.gc_pins (tenant_id, digest, reason) VALUES (%s, %s, 'hold')",
                 (T, pinned))
    backdate(env, list(_objects(env)))
    env.put(T, b"young orphan")  # inside the grace
    keep_before = _objects(env)
    enqueue(conn, "gc_sweep", {"tenant_id": T})
    assert drain(conn).completed == 1
    gone = keep_before - _objects(env)
    expected_gone = {dead_root, digest_of(b"dead data"), orphan}
    assert gone == expected_gone
    epoch = conn.execute("SELECT state, deleted, candidates, dry_run FROM awc.gc_epochs"
                         ).fetchone()
    assert epoch == ("COMPLETED", len(expected_gone), len(expected_gone), False)


def test_gc_dry_run_deletes_nothing_and_records_the_plan(
    db_url: str, env: Any, conn: psycopg.Connection[Any], store_kind: str
) -> None:
    configure(db_url, env, gc_dry_run=True)
    orphans = [env.put(T, f"orphan {n}".encode()) for n in range(3)]
    backdate(env, orphans)
    enqueue(conn, "gc_sweep", {"tenant_id": T})
    drain(conn)
    assert set(orphans) <= _objects(env)
    assert conn.execute("SELECT state, candidates, deleted, dry_run FROM awc.gc_epochs"
                        ).fetchone() == ("COMPLETED", 3, 0, True)
    result = conn.execute("SELECT result FROM awc.jobs").fetchone()
    assert result is not None and result[0]["would_delete"] == 3


def test_gc_batch_cap_includes_the_canary(
    db_url: str, env: Any, conn: psycopg.Connection[Any], store_kind: str
) -> None:
    configure(db_url, env, gc_batch_size=5, gc_canary_size=2)
    orphans = [env.put(T, f"orphan {n}".encode()) for n in range(12)]
    backdate(env, orphans)
    enqueue(conn, "gc_sweep", {"tenant_id": T})
    drain(conn)
    assert len(set(orphans) - _objects(env)) == 5


class RegisterDuringSweep:
    """A store whose `list` (the sweep's plan) lets a producer register a
    snapshot of an old, otherwise-unreachable object mid-epoch."""

    def __init__(self, inner: Any, on_list: Any) -> None:
        self._inner = inner
        self._on_list = on_list

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def list(self, tenant_id: str) -> Any:
        listed = list(self._inner.list(tenant_id))
        self._on_list()
        return iter(listed)


def test_gc_keeps_an_object_referenced_by_a_snapshot_registered_mid_epoch(
    db_url: str, env: Any, conn: psycopg.Connection[Any], store_kind: str
) -> None:
    old = write_tree(env, T, {"shared": "old content"})
    backdate(env, [old, digest_of(b"old content")])

    def producer_registers() -> None:
        # A producer reuses the old tree: it writes (refreshing) and registers.
        with connect(db_url) as other:
            root = write_tree(env, T, {"shared": "old content"})
            register_snapshot(other, T, root, validate=False)

    configure(db_url, RegisterDuringSweep(env, producer_registers))
    enqueue(conn, "gc_sweep", {"tenant_id": T})
    drain(conn)
    assert {old, digest_of(b"old content")} <= _objects(env)


@pytest.mark.parametrize("store_kind", ["memory"])
def test_gc_keeps_an_old_object_a_producer_references_without_rewriting(
    db_url: str, env: Any, conn: psycopg.Connection[Any]
) -> None:
    """Even a producer that skips the write (a control plane that only
    registers) is safe: registration waits for the batch lock and each batch
    re-marks what was registered since the plan."""
    old = write_tree(env, T, {"shared": "old content"})
    backdate(env, [old, digest_of(b"old content")])

    def register_only() -> None:
        with connect(db_url) as other:
            register_snapshot(other, T, old, validate=False)

    configure(db_url, RegisterDuringSweep(env, register_only))
    enqueue(conn, "gc_sweep", {"tenant_id": T})
    report = drain(conn)
    assert {old, digest_of(b"old content")} <= _objects(env)
    assert report.completed + report.failed == 1  # aborted or skipped them; never deleted


@pytest.mark.parametrize("store_kind", ["memory"])
def test_two_concurrent_epochs_for_one_tenant_never_both_delete(
    db_url: str, env: Any, conn: psycopg.Connection[Any]
) -> None:
    orphans = [env.put(T, f"orphan {n}".encode()) for n in range(20)]
    backdate(env, orphans)
    listed, proceed = threading.Event(), threading.Event()

    def hold_first_sweep() -> None:
        # The first sweep has planned; keep it running until the second is done.
        listed.set()
        assert proceed.wait(20)

    configure(db_url, RegisterDuringSweep(env, hold_first_sweep))
    enqueue(conn, "gc_sweep", {"tenant_id": T})
    enqueue(conn, "gc_sweep", {"tenant_id": T})
    reports: list[Any] = []
    runner = threading.Thread(target=lambda: reports.append(drain(conn, concurrency=2)))
    runner.start()
    assert listed.wait(20)
    with connect(db_url) as watcher:
        wait_for(lambda: watcher.execute(
            "SELECT count(*) FROM awc.jobs WHERE state = 'COMPLETED'").fetchone() == (1,),
            what="the second sweep to finish")
        skipped = watcher.execute("SELECT result FROM awc.jobs WHERE state = 'COMPLETED'"
                                  ).fetchone()
    proceed.set()
    runner.join(30)
    assert skipped is not None and skipped[0] == {"skipped": "epoch running"}
    assert reports[0].completed == 2
    epochs = conn.execute("SELECT state, deleted FROM awc.gc_epochs").fetchall()
    assert epochs == [("COMPLETED", 20)]


@pytest.mark.parametrize("store_kind", ["memory"])
def test_a_stale_epoch_whose_holder_lost_its_lease_is_taken_over(
    env: Any, conn: psycopg.Connection[Any]
) -> None:
    conn.execute("INSERT INTO awc.gc_epochs (tenant_id, holder_job_id, holder_token) "
                 "VALUES (%s, 424242, gen_random_uuid())", (T,))
    orphan = env.put(T, b"orphan")
    backdate(env, [orphan])
    enqueue(conn, "gc_sweep", {"tenant_id": T})
    drain(conn)
    states = conn.execute("SELECT state FROM awc.gc_epochs ORDER BY id").fetchall()
    assert states == [("ABORTED",), ("COMPLETED",)]
    assert orphan not in _objects(env)
