"""SPEC §10, §10.5, §11.2: GC never deletes a live object, whatever the
tenant's objects hold, whatever happens to its session, wherever its links
point; validation sees every object of a closure."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from tick.handlers.producer import ensure_tenant, register_snapshot
from tick.handlers.runtime import runtime
from tick.handlers.stores import open_store
from tick.handlers.stores.base import StoreRefused, check_tenant, digest_of, hex_of
from tick.handlers.trees import CorruptTree, encode_tree, parse_tree, walk_closure, write_tree

from tests.support import TENANT as T
from tests.support import configure_handlers as configure
from tests.support import drain, snapshot_state
from tick.producer import enqueue

OLD = datetime.now(UTC) - timedelta(days=3)


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "memory":
        return open_store("memory://")
    return open_store(f"file://{tmp_path}/store")


@pytest.fixture
def env(db_url: str, store: Any, conn: psycopg.Connection[Any]) -> Iterator[Any]:
    configure(db_url, store, gc_canary_size=2)
    ensure_tenant(conn, T)
    yield store
    runtime().close()


def backdate_all(store: Any, tenant: str = T) -> None:
    for info in list(store.list(tenant)):
        store.set_modified(tenant, info.digest, OLD)


def entry(name: str, digest: str, kind: str) -> dict[str, str]:
    return {"name": name, "digest": digest, "type": kind}


# -- one object, two types (item 1) -----------------------------------------------------


def blob_and_tree_at_one_digest(store: Any) -> tuple[str, str]:
    """A root that references the same bytes as a blob (first, by name) and
    as a tree; only the tree leads to `child`. Returns (root, child)."""
    child = store.put(T, b"reachable only through the tree")
    inner = store.put(T, encode_tree([entry("c", child, "blob")]))
    root = store.put(T, encode_tree([entry("a-copy.json", inner, "blob"),
                                     entry("b-dir", inner, "tree")]))
    return root, child


def test_validate_follows_bytes_referenced_both_as_blob_and_as_tree(
    env: Any, conn: psycopg.Connection[Any]
) -> None:
    root, child = blob_and_tree_at_one_digest(env)
    env.delete(T, child)
    snap = register_snapshot(conn, T, root)
    drain(conn)
    state, verdict = snapshot_state(conn, snap)
    assert state == "FAILED" and verdict["missing"] == [child]
    assert verdict["objects"] == 3  # distinct digests: root, the shared bytes, the child


def test_gc_keeps_a_child_reachable_only_through_a_blob_typed_twin(
    env: Any, conn: psycopg.Connection[Any]
) -> None:
    root, child = blob_and_tree_at_one_digest(env)
    register_snapshot(conn, T, root, validate=False, state="READY")
    orphan = env.put(T, b"orphan")
    backdate_all(env)
    enqueue(conn, "gc_sweep", {"tenant_id": T})
    assert drain(conn).completed == 1
    assert env.head(T, child) is not None
    assert env.head(T, orphan) is None


# -- the lock's session lost mid-batch (item 2) --------------------------------------------


class KillsTheLockHolder:
    """A store whose fifth delete is followed by the death of the session
    holding GC's tenant lock (as an administrator's pg_terminate_backend,
    an idle-in-transaction timeout or a failover would)."""

    def __init__(self, store: Any, admin_url: str) -> None:
        self._store = store
        self._admin_url = admin_url
        self.deletes: list[str] = []
        self.killed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def delete(self, tenant_id: str, digest: str) -> None:
        self._store.delete(tenant_id, digest)
        self.deletes.append(digest)
        if len(self.deletes) == 5:
            with psycopg.connect(self._admin_url, autocommit=True) as admin:
                killed = admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = 'awc-handlers' AND datname = current_database() "
                    "AND state LIKE 'idle in transaction%'").fetchall()
            self.killed = killed == [(True,)]


def test_gc_deletes_nothing_once_its_lock_session_is_lost(
    db_url: str, conn: psycopg.Connection[Any], store: Any
) -> None:
    ensure_tenant(conn, T)
    orphans = [store.put(T, f"orphan {n}".encode()) for n in range(40)]
    backdate_all(store)
    killer = KillsTheLockHolder(store, db_url)
    configure(db_url, killer, gc_canary_size=2)
    try:
        job = enqueue(conn, "gc_sweep", {"tenant_id": T})
        report = drain(conn)
    finally:
        runtime().close()
    assert killer.killed
    assert len(killer.deletes) == 5  # the canary's 2 and 3 more: none after the loss
    assert sum(store.head(T, d) is not None for d in orphans) == 35
    assert report.retried == 1
    row = conn.execute("SELECT state, last_error FROM awc.jobs WHERE id = %s", (job,)).fetchone()
    assert row[0] == "PENDING" and "lost the tenant lock" in row[1]
    epoch = conn.execute("SELECT state, deleted, error FROM awc.gc_epochs").fetchone()
    assert epoch[0] == "ABORTED" and epoch[1] == 5 and "lost the tenant lock" in epoch[2]


# -- symbolic links in a file:// store (item 3) ---------------------------------------------


def test_a_tenant_directory_that_links_to_another_is_refused(
    db_url: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    store = open_store(f"file://{tmp_path}/store")
    alice_root = write_tree(store, "alice", {"data": "alice's live data"})
    for info in store.list("alice"):
        store.set_modified("alice", info.digest, OLD)
    os.symlink(tmp_path / "store" / "alice", tmp_path / "store" / "mallory")
    for call in (lambda: list(store.list("mallory")),
                 lambda: store.get("mallory", alice_root),
                 lambda: store.head("mallory", alice_root),
                 lambda: store.delete("mallory", alice_root),
                 lambda: store.put("mallory", b"x")):
        with pytest.raises(StoreRefused):
            call()
    configure(db_url, store, gc_grace_secs=0)
    try:
        for tenant in ("alice", "mallory"):
            ensure_tenant(conn, tenant)
        register_snapshot(conn, "alice", alice_root, validate=False, state="READY")
        register_snapshot(conn, "mallory", alice_root)  # validate through the link
        enqueue(conn, "gc_sweep", {"tenant_id": "mallory"})
        report = drain(conn)
    finally:
        runtime().close()
    assert report.failed == 2 and report.retried == 0  # refused, not retried forever
    assert {info.digest for info in store.list("alice")} == {alice_root,
                                                              digest_of(b"alice's live data")}


def test_an_object_file_that_is_a_link_is_never_read_through(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/store")
    secret = tmp_path / "outside.txt"
    secret.write_bytes(b"not the store's")
    digest = digest_of(b"not the store's")
    store.put(T, b"anything")  # makes the tenant's directories
    os.symlink(secret, tmp_path / "store" / T / "objects" / "sha256" / hex_of(digest))
    with pytest.raises(StoreRefused):
        store.get(T, digest)
    store.delete(T, digest)  # removes the link, never its target
    assert secret.read_bytes() == b"not the store's"



@pytest.mark.timeout(30)
def test_an_object_file_that_is_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    """A FIFO where an object should be: opening it blocked the reading
    thread for good (and the pooled connection a GC mark held)."""
    store = open_store(f"file://{tmp_path}/store")
    digest = digest_of(b"never written")
    store.put(T, b"anything")  # makes the tenant's directories
    os.mkfifo(tmp_path / "store" / T / "objects" / "sha256" / hex_of(digest))
    with pytest.raises(StoreRefused, match="not a regular file"):
        store.get(T, digest)

# -- trees nested beyond any limit (item 7) ------------------------------------------------


def test_a_tree_nested_too_deeply_is_corrupt_and_gc_goes_on(
    env: Any, conn: psycopg.Connection[Any]
) -> None:
    depth = 100_000
    deep = env.put(T, b'{"entries":' + b"[" * depth + b"]" * depth + b"}")
    snap = register_snapshot(conn, T, deep)
    report = drain(conn)
    assert report.completed == 1 and report.retried == 0  # corrupt, never retried
    state, verdict = snapshot_state(conn, snap)
    assert state == "FAILED" and verdict["corrupt"] == [deep]
    # Once validation has said so, the tenant's GC is not blocked by the tree.
    enqueue(conn, "gc_sweep", {"tenant_id": T})
    assert drain(conn).completed == 1
    assert conn.execute("SELECT state FROM awc.gc_epochs").fetchone() == ("COMPLETED",)


def test_a_chain_of_trees_deeper_than_the_recursion_limit_is_walked(env: Any) -> None:
    spec: dict[str, Any] = {"leaf": "bottom"}
    for _ in range(3000):
        spec = {"d": spec}
    root = write_tree(env, T, spec)
    walk = walk_closure(env, T, root)
    assert not walk.missing and not walk.corrupt and len(walk.seen) == 3002


# -- canonical trees and identifiers (item 25) ----------------------------------------------

D = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    "data",
    [
        b'{"entries":[],"entries":[]}',
        b'{"entries":[],"extra":1}',
        b'{"entries":[{"digest":"' + D.encode() + b'","name":"a","type":"blob","x":1}]}',
        b'{"entries":[{"digest":"' + D.encode() + b'","name":NaN,"type":"blob"}]}',
        b'{"entries": []}',
        b'{"entries":[{"name":"a","digest":"' + D.encode() + b'","type":"blob"}]}',
        b'{"entries":[{"digest":"' + D.encode() + b'","name":"\\u0061","type":"blob"}]}',
        b'{"entries":[{"digest":"' + D.encode() + b'\\n","name":"a","type":"blob"}]}',
        b"[]",
        b"\xff",
    ],
)
def test_a_tree_not_in_its_canonical_bytes_is_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptTree):
        parse_tree(data)


@pytest.mark.parametrize("names", [["../../etc/passwd"], [""], ["a/b"], ["."], [".."],
                                   ["a\x00b"], ["x", "x"], ["b", "a"]])
def test_tree_entry_names_must_be_plain_and_unique(names: list[str]) -> None:
    entries = [entry(n, D, "blob") for n in names]
    text = json.dumps({"entries": entries}, sort_keys=True, separators=(",", ":")).encode()
    with pytest.raises(CorruptTree):
        parse_tree(text)


def test_a_canonical_tree_parses() -> None:
    data = encode_tree([entry("b", D, "tree"), entry("a", D, "blob"), entry("é", D, "blob")])
    assert parse_tree(data) == [(D, "blob"), (D, "tree"), (D, "blob")]


@pytest.mark.parametrize("tenant", ["acme\n", "acme\r\n", "\nacme", "ac/me", "..", ""])
def test_identifiers_are_matched_in_full(tenant: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        check_tenant(tenant)
    store = open_store(f"file://{tmp_path}/store")
    with pytest.raises(ValueError):
        store.put(tenant, b"x")
    with pytest.raises(ValueError):
        hex_of(D + "\n")
    assert not (tmp_path / "store").exists() or list((tmp_path / "store").iterdir()) == []


def test_a_gc_payload_naming_a_tenant_with_a_newline_is_a_fail(
    env: Any, conn: psycopg.Connection[Any]
) -> None:
    job = enqueue(conn, "gc_sweep", {"tenant_id": "acme\n"})
    assert drain(conn).failed == 1
    row = conn.execute("SELECT last_error FROM awc.jobs WHERE id = %s", (job,)).fetchone()
    assert row[0].startswith("ValidationError: tenant_id")


@pytest.mark.parametrize("tenant", ["acme2\n", "..", "a/b"])
def test_a_snapshot_of_a_tenant_no_store_takes_fails_at_once(
    env: Any, conn: psycopg.Connection[Any], tenant: str
) -> None:
    """A tenant row of plain SQL whose id the store refuses: its snapshot's
    validation was retried until its attempts ran out (a ValueError the
    handler took for a transient one)."""
    from tick.handlers.producer import ensure_tenant, register_snapshot

    ensure_tenant(conn, tenant)
    register_snapshot(conn, tenant, D, validate=True)
    assert drain(conn).failed == 1
    row = conn.execute("SELECT attempts, last_error FROM awc.jobs").fetchone()
    assert row is not None and row[0] == 1 and "invalid tenant id" in row[1]


# -- a tree the store does not return (a sweep of failing stores) ---------------------------


def test_gc_deletes_nothing_under_a_live_snapshot_s_tree_the_store_does_not_return(
    env: Any, conn: psycopg.Connection[Any]
) -> None:
    """A READY snapshot's subtree read as missing (lost, or a store answering
    404 for a moment) hid its children from the mark, and GC deleted them:
    the tree, put back or answered again, led to nothing. Its children are
    unknown, as under a corrupt tree: the epoch is aborted."""
    root = write_tree(env, T, {"sub": {"a": "kept a", "b": "kept b"}, "top": "kept top"})
    sub = next(d for d, k in parse_tree(b"".join(env.chunks(T, root))) if k == "tree")
    children = [d for d, _ in parse_tree(b"".join(env.chunks(T, sub)))]
    sub_bytes = b"".join(env.chunks(T, sub))
    register_snapshot(conn, T, root, validate=False, state="READY")
    orphan = env.put(T, b"orphan")
    backdate_all(env)
    env.delete(T, sub)
    enqueue(conn, "gc_sweep", {"tenant_id": T})
    report = drain(conn)
    assert report.failed == 1
    state, error = conn.execute("SELECT state, error FROM awc.gc_epochs").fetchone()
    assert state == "ABORTED" and "does not return" in error
    assert all(env.head(T, child) is not None for child in children)
    assert env.head(T, orphan) is not None  # nothing at all was deleted
    # Once the tree is back (or a scrub marked the snapshot DEGRADED), GC goes on.
    assert env.put(T, sub_bytes) == sub
    enqueue(conn, "gc_sweep", {"tenant_id": T})
    assert drain(conn).completed == 1
    assert all(env.head(T, child) is not None for child in children)
    assert env.head(T, orphan) is None


@pytest.mark.parametrize("what", ["fifo", "directory", "link"])
def test_a_non_file_where_an_object_should_be_is_a_corrupt_object(
    db_url: str, conn: psycopg.Connection[Any], tmp_path: Path, what: str
) -> None:
    """A FIFO, a directory or a link in place of a blob dead-lettered the
    validation (`is not a regular file; refused`) and left the snapshot
    VALIDATING for good. It is that object's decay: a verdict, FAILED,
    naming it."""
    store = open_store(f"file://{tmp_path}/store")
    configure(db_url, store)
    try:
        ensure_tenant(conn, T)
        root = write_tree(store, T, {"bad": "to be replaced", "good": "intact"})
        bad = next(d for d, _ in parse_tree(b"".join(store.chunks(T, root)))
                   if b"".join(store.chunks(T, d)) == b"to be replaced")
        path = tmp_path / "store" / T / "objects" / "sha256" / hex_of(bad)
        path.unlink()
        if what == "fifo":
            os.mkfifo(path)
        elif what == "directory":
            path.mkdir()
        else:
            path.symlink_to(tmp_path / "elsewhere")
        snap = register_snapshot(conn, T, root)
        report = drain(conn)
        assert (report.completed, report.failed) == (1, 0)
        state, verdict = snapshot_state(conn, snap)
        assert state == "FAILED" and verdict["corrupt"] == [bad]
    finally:
        runtime().close()


@pytest.mark.parametrize("gone", ["store", f"store/{T}"])
def test_a_store_directory_that_is_gone_is_an_outage_not_missing_objects(
    db_url: str, conn: psycopg.Connection[Any], tmp_path: Path, gone: str
) -> None:
    """The store's directory moved away (a volume not mounted, or its mount
    point left empty) read as every object missing: the snapshots validated
    meanwhile FAILED, those scrubbed DEGRADED, for good. It is an outage: a
    Retry, no verdict."""
    store = open_store(f"file://{tmp_path}/store")
    configure(db_url, store)
    try:
        ensure_tenant(conn, T)
        ready = register_snapshot(conn, T, write_tree(store, T, {"a": "one"}), validate=False,
                                  state="READY")
        checking = register_snapshot(conn, T, write_tree(store, T, {"b": "two"}))
        scrub = enqueue(conn, "snapshot_scrub", {"snapshot_id": str(ready)})
        (tmp_path / gone).rename(tmp_path / "away")
        report = drain(conn)
        assert (report.retried, report.failed) == (2, 0)
        assert snapshot_state(conn, ready)[0] == "READY"
        assert snapshot_state(conn, checking)[0] == "VALIDATING"
        why = conn.execute("SELECT last_error FROM awc.jobs WHERE id = %s", (scrub,)
                           ).fetchone()[0]
        assert "does not exist" in why or "is missing" in why, why
    finally:
        runtime().close()


class WrappedStore:
    """`store`, but for the calls a subclass makes its own."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class SlowDeletes(WrappedStore):
    """A store whose deletes each take `secs` (a throttled S3)."""

    def __init__(self, store: Any, secs: float) -> None:
        super().__init__(store)
        self._secs = secs
        self.deletes: list[float] = []

    def delete(self, tenant_id: str, digest: str) -> None:
        import time

        time.sleep(self._secs)
        self._store.delete(tenant_id, digest)
        self.deletes.append(time.monotonic())


@pytest.mark.timeout(60)
def test_a_sweep_cut_at_its_timeout_deletes_no_more(
    db_url: str, conn: psycopg.Connection[Any], store: Any
) -> None:
    """A sweep cut at its deadline had its thread abandoned, not stopped: it
    went on deleting, one object every 20 s, for minutes after its job was
    recorded (SPEC §26: a cut run's later writes are refused). It stops
    at the next object."""
    import time

    ensure_tenant(conn, T)
    for n in range(40):
        store.put(T, f"orphan {n}".encode())
    backdate_all(store)
    slow = SlowDeletes(store, 0.3)
    configure(db_url, slow, gc_canary_size=30)
    try:
        enqueue(conn, "gc_sweep", {"tenant_id": T}, timeout_secs=1)
        report = drain(conn)
        cut = time.monotonic()
        assert report.retried == 1  # cut at its timeout
        time.sleep(2.0)  # what an abandoned thread would do meanwhile
    finally:
        runtime().close()
    assert len(slow.deletes) < 10
    assert [t for t in slow.deletes if t > cut + 0.5] == []


class RefusesDeletes(WrappedStore):
    """A store that will not delete `refused` objects (an immutable file,
    S3 Object Lock), or any at all."""

    def __init__(self, store: Any, refused: set[str] | None) -> None:
        super().__init__(store)
        self._refused = refused
        self.tried: list[str] = []

    def delete(self, tenant_id: str, digest: str) -> None:
        from tick.handlers.stores.base import StoreError

        self.tried.append(digest)
        if self._refused is None or digest in self._refused:
            raise StoreError(f"deleting {digest}: Operation not permitted")
        self._store.delete(tenant_id, digest)


@pytest.mark.parametrize("everything", [False, True])
def test_an_object_the_store_will_not_delete_stops_no_sweep(
    db_url: str, conn: psycopg.Connection[Any], store: Any, everything: bool
) -> None:
    """One object the store refused to delete aborted every epoch of its
    tenant (the same object first each time), nothing collected until the
    job's attempts ran out. It is passed over and named; a store that
    refuses every delete (read-only) still aborts the epoch, a Retry."""
    ensure_tenant(conn, T)
    orphans = sorted(store.put(T, f"orphan {n}".encode()) for n in range(12))
    backdate_all(store)
    refusing = RefusesDeletes(store, None if everything else {orphans[0]})
    configure(db_url, refusing, gc_canary_size=2)
    try:
        enqueue(conn, "gc_sweep", {"tenant_id": T})
        report = drain(conn)
    finally:
        runtime().close()
    state, deleted, error = conn.execute(
        "SELECT state, deleted, error FROM awc.gc_epochs").fetchone()
    if everything:
        assert report.retried == 1 and state == "ABORTED" and deleted == 0
        assert len(refusing.tried) == 3 and "not permitted" in error
        assert all(store.head(T, d) is not None for d in orphans)
    else:
        assert report.completed == 1 and state == "COMPLETED" and deleted == 11
        assert f"1 objects the store did not delete (left for a later epoch), such as " \
            f"{orphans[0]}" in error
        assert [d for d in orphans if store.head(T, d) is not None] == [orphans[0]]


def test_three_objects_the_store_will_not_delete_first_in_order_stop_no_tenant(
    db_url: str, conn: psycopg.Connection[Any], store: Any
) -> None:
    """Three refused in a row abort an epoch (the store is at fault); when
    they were the first three candidates in the listing's order, every
    epoch of the tenant aborted. The candidates go in no fixed order: a
    later epoch passes them over and collects the rest."""
    ensure_tenant(conn, T)
    orphans = sorted(store.put(T, f"orphan {n}".encode()) for n in range(12))
    backdate_all(store)
    configure(db_url, RefusesDeletes(store, set(orphans[:3])), gc_canary_size=2)
    try:
        for _ in range(6):
            enqueue(conn, "gc_sweep", {"tenant_id": T})
            drain(conn)
            if conn.execute("SELECT count(*) FROM awc.gc_epochs WHERE state = 'COMPLETED'"
                            ).fetchone() != (0,):
                break
    finally:
        runtime().close()
    assert [d for d in orphans if store.head(T, d) is not None] == orphans[:3]
