"""SPEC §10.5: gc_sweep, one durable GC epoch per tenant, run by real ticks
against every store."""


from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest
from tick.handlers.producer import register_snapshot
from tick.handlers.stores.base import digest_of
from tick.handlers.trees import encode_tree, write_tree

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


class UploadDuringSweep(RegisterDuringSweep):
    """The control plane of the upload protocol, mid-epoch: under the tenant's
    key-share lock it writes one tree and registers a READY snapshot on it,
    only checking that the tree's old child is present (as the protocol
    allows)."""

    def __init__(self, inner: Any, db_url: str, tree: bytes, child: str) -> None:
        super().__init__(inner, self._upload)
        self._db_url, self._tree, self._child = db_url, tree, child

    def _upload(self) -> None:
        with connect(self._db_url) as other, other.transaction():
            other.execute("SELECT 1 FROM awc.tenants WHERE id = %s FOR KEY SHARE", (T,))
            self._inner.put(T, self._tree)
            assert self._inner.head(T, self._child) is not None
            register_snapshot(other, T, digest_of(self._tree), validate=False, state="READY")


@pytest.mark.parametrize("before", ["missing", "corrupt"])
def test_gc_follows_a_tree_that_was_missing_or_corrupt_at_the_mark_and_is_there_now(
    db_url: str, env: Any, conn: psycopg.Connection[Any], store_kind: str, before: str
) -> None:
    """A tree missing from the store when the epoch marked (under a snapshot
    still validating), or corrupt there (under a failed one), then uploaded
    with a snapshot that reaches it: the mark never read it again, and GC
    deleted its old child, which a live snapshot reached (SPEC §10.5)."""
    child = env.put(T, b"precious user data")
    tree = encode_tree([{"name": "b", "digest": child, "type": "blob"}])
    root = env.put(T, encode_tree([{"name": "t", "digest": digest_of(tree), "type": "tree"}]))
    if before == "missing":
        register_snapshot(conn, T, root, validate=False)  # VALIDATING
        backdate(env, [child, root])
    else:
        env.put_at(T, digest_of(tree), b"garbage")
        register_snapshot(conn, T, root, validate=False, state="FAILED")
        backdate(env, [child, root, digest_of(tree)])
    configure(db_url, UploadDuringSweep(env, db_url, tree, child))
    enqueue(conn, "gc_sweep", {"tenant_id": T})
    drain(conn)
    assert child in _objects(env)


def test_gc_aborts_on_a_tree_whose_bytes_decayed_into_another_valid_tree(
    env: Any, conn: psycopg.Connection[Any], store_kind: str
) -> None:
    """The mark read trees without checking their hash: a tree whose bytes
    became another valid tree led it to other children, and GC deleted the
    real ones, which a READY snapshot reached."""
    real = write_tree(env, T, {"x": "the real child"})
    other = write_tree(env, T, {"y": "another tree"})
    root = env.put(T, encode_tree([{"name": "d", "digest": real, "type": "tree"}]))
    register_snapshot(conn, T, root, validate=False, state="READY")
    env.put_at(T, real, env.get(T, other))  # the tree's bytes, decayed into `other`'s
    backdate(env, list(_objects(env)))
    enqueue(conn, "gc_sweep", {"tenant_id": T})
    assert drain(conn).failed == 1  # the epoch aborts: the mark is incomplete
    assert digest_of(b"the real child") in _objects(env)
