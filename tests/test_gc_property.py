"""SPEC §10.5, property-based: GC never deletes an object reachable from a
live snapshot, whatever the trees and wherever a producer's registration
falls during the epoch (before the plan, inside a deletion batch, between
batches). The producer follows the upload protocol (handlers.producer):
tenant KEY SHARE lock, write, register, commit."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import tick.handlers as handlers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tick.handlers.producer import ensure_tenant, register_snapshot, upload
from tick.handlers.runtime import runtime
from tick.handlers.stores.memory import MemoryStore
from tick.handlers.trees import walk_closure, write_tree

from tick import tick
from tick.db import connect
from tick.engine.registry import REGISTRY
from tick.producer import enqueue
from tick.settings import Settings

T = "acme"
BLOBS = [f"blob-{n}" for n in range(12)]

# A snapshot: a small tree over a shared pool of blobs, so snapshots overlap.
tree_strategy = st.dictionaries(
    st.sampled_from(["a", "b", "c", "d"]),
    st.one_of(st.sampled_from(BLOBS),
              st.dictionaries(st.sampled_from(["x", "y"]), st.sampled_from(BLOBS), min_size=1,
                              max_size=2)),
    min_size=1, max_size=4,
)


class Interleaved:
    """The store, with a producer registering a snapshot at the Nth store call."""

    def __init__(self, inner: MemoryStore, at: int, register: Any) -> None:
        self._inner, self._at, self._register = inner, at, register
        self.calls = 0
        self.thread: threading.Thread | None = None

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in ("list", "head", "delete", "get"):
            return attr

        def counted(*args: Any) -> Any:
            self.calls += 1
            if self.calls == self._at and self.thread is None:
                # A concurrent producer: it may block on GC's batch lock, so it
                # runs on its own thread, as it would in its own process.
                self.thread = threading.Thread(target=self._register)
                self.thread.start()
            return attr(*args)

        return counted


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    trees=st.lists(st.tuples(tree_strategy, st.sampled_from(["READY", "DELETED", "FAILED"])),
                   min_size=1, max_size=4),
    new_tree=tree_strategy,
    at=st.integers(min_value=1, max_value=40),
    canary=st.integers(min_value=1, max_value=3),
)
def test_gc_never_deletes_what_a_live_snapshot_reaches(
    db_url: str, trees: list[tuple[Any, str]], new_tree: Any, at: int, canary: int,
) -> None:
    base = MemoryStore()
    with connect(db_url) as conn:
        conn.execute("TRUNCATE awc.jobs, awc.gc_epochs, awc.gc_pins, awc.snapshots, "
                     "awc.workspaces, awc.tenants CASCADE")
        ensure_tenant(conn, T)
        for tree, state in trees:
            register_snapshot(conn, T, write_tree(base, T, tree), validate=False, state=state)
        # Plant the new snapshot's objects ahead of time, then let them age:
        # until it is registered they are unreachable, and old.
        new_root = write_tree(base, T, new_tree)
        base.put(T, b"an orphan")
        for info in list(base.list(T)):
            base.set_modified(T, info.digest, datetime.now(UTC) - timedelta(days=3))

        def producer() -> None:
            with connect(db_url) as other:
                root, _ = upload(other, base, T, new_tree, validate=False)
                assert root == new_root

        store = Interleaved(base, at, producer)
        handlers.configure(Settings(database_url=db_url, gc_grace_secs=3600,
                                    gc_canary_size=canary, gc_batch_size=1000), store)
        enqueue(conn, "gc_sweep", {"tenant_id": T})
        tick(conn, registry=REGISTRY, max_secs=60)
        if store.thread is None:
            producer()  # the sweep made fewer calls: the producer comes after it
        else:
            store.thread.join(30)
        live = conn.execute("SELECT root_digest FROM awc.snapshots WHERE state <> 'DELETED'"
                            ).fetchall()
        kept = {o.digest for o in base.list(T)}
        for (root,) in live:
            named = walk_closure(base, T, root, verify=False).seen
            assert named <= kept, "a live snapshot lost an object"
        runtime().close()
