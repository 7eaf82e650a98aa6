"""SPEC §17 for the built-in walks: a closure too large for one tick is
validated across a chain of short ticks, with the verdict of one long tick
and within 1.1 times its store reads, from a journal only the current claim
can write."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from tick.handlers.producer import ensure_tenant, register_snapshot
from tick.handlers.runtime import runtime
from tick.handlers.stores.base import digest_of
from tick.handlers.stores.memory import MemoryStore
from tick.handlers.trees import write_tree

from tests.support import TENANT, configure_handlers, job_row, snapshot_state
from tick.producer import enqueue


class CountingStore(MemoryStore):
    """A memory store that counts object reads."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def chunks(self, tenant_id: str, digest: str) -> Any:
        self.reads += 1
        return super().chunks(tenant_id, digest)


def run_tick(conn: psycopg.Connection[Any], secs: float) -> Any:
    from tick import tick
    from tick.engine.registry import REGISTRY

    return tick(conn, registry=REGISTRY, max_secs=secs, max_jobs=1)


@pytest.mark.timeout(600)
def test_a_200k_object_validate_in_5_second_ticks_matches_one_long_tick(
    db_url: str, conn: psycopg.Connection[Any]
) -> None:
    store = CountingStore()
    configure_handlers(db_url, store)
    ensure_tenant(conn, TENANT)
    # 200 directories of 1,000 files: 200,201 objects, two of them then lost.
    root = write_tree(store, TENANT, {f"d{d:03}": {f"f{n:04}": f"{d}/{n}" for n in range(1000)}
                                      for d in range(200)})
    for lost in ("7/7", "150/999"):
        store.delete(TENANT, digest_of(lost.encode()))
    once = register_snapshot(conn, TENANT, root, validate=False)
    chained = register_snapshot(conn, TENANT, root, validate=False)
    try:
        enqueue(conn, "snapshot_validate", {"snapshot_id": str(once)})
        store.reads = 0
        assert run_tick(conn, 600).completed == 1
        one_pass = store.reads
        job_id = enqueue(conn, "snapshot_validate", {"snapshot_id": str(chained)})
        store.reads, ticks = 0, 0
        while job_row(conn, job_id)["state"] == "PENDING" and ticks < 100:
            report = run_tick(conn, 5)
            ticks += 1
            assert report.claimed == 1 and report.failed == report.retried == 0
    finally:
        runtime().close()
    job = job_row(conn, job_id)
    assert job["state"] == "COMPLETED" and ticks >= 2
    assert (job["attempts"], job["continues"]) == (1, ticks - 1)
    assert snapshot_state(conn, chained) == snapshot_state(conn, once)
    state, verdict = snapshot_state(conn, once)
    assert (state, verdict["objects"], verdict["missing_count"]) == ("FAILED", 200_201, 2)
    assert one_pass >= 200_199 and store.reads <= 1.1 * one_pass, (store.reads, one_pass)
    assert conn.execute("SELECT count(*) FROM awc.walk_marks").fetchone() == (0,)


def test_a_stale_claim_cannot_write_the_walk_journal(
    db_url: str, conn: psycopg.Connection[Any]
) -> None:
    from tick.handlers.journal import Journal

    from tick import JobContext, LeaseLost

    configure_handlers(db_url, MemoryStore())
    job_id = enqueue(conn, "snapshot_validate", {"snapshot_id": "00000000-0000-0000-0000-0000"
                                                                "00000000"})
    token = conn.execute("UPDATE awc.jobs SET state = 'RUNNING', claim_token = gen_random_uuid() "
                         "RETURNING claim_token::text").fetchone()[0]
    try:
        for claim, held in ((token, True), ("00000000-0000-0000-0000-000000000001", False)):
            ctx = JobContext(job_id, "snapshot_validate", 1, 5, 1e18, lambda c, s: 1e18, claim)
            journal = Journal(ctx, runtime())
            walk = journal.restore(digest_of(b"root"))
            walk.found(digest_of(b"root"), "tree", "missing")
            if held:
                journal.write(walk)
            else:
                with pytest.raises(LeaseLost):
                    journal.write(walk)
    finally:
        runtime().close()
    rows = conn.execute("SELECT status FROM awc.walk_marks WHERE job_id = %s", (job_id,)).fetchall()
    assert rows == [("missing",)]


class SlowStore(CountingStore):
    """Reads and deletes that take a while, as over a slow network."""

    def chunks(self, tenant_id: str, digest: str) -> Any:
        time.sleep(0.03)
        return super().chunks(tenant_id, digest)

    def delete(self, tenant_id: str, digest: str) -> None:
        time.sleep(0.01)
        super().delete(tenant_id, digest)


@pytest.mark.timeout(300)
def test_a_gc_epoch_longer_than_a_tick_goes_on_across_claims(
    db_url: str, conn: psycopg.Connection[Any]
) -> None:
    from tests.support import backdate

    store = SlowStore()
    configure_handlers(db_url, store, gc_canary_size=5)
    ensure_tenant(conn, TENANT)
    live = write_tree(store, TENANT, {f"d{d:02}": {f"f{n}": f"{d}/{n}" for n in range(5)}
                                      for d in range(80)})  # 81 trees the mark reads
    register_snapshot(conn, TENANT, live, validate=False, state="READY")
    keep = {o.digest for o in store.list(TENANT)}
    orphans = {store.put(TENANT, f"orphan {n}".encode()) for n in range(300)}
    backdate(store, list(keep | orphans))
    job_id = enqueue(conn, "gc_sweep", {"tenant_id": TENANT})
    store.reads, ticks = 0, 0
    try:
        while job_row(conn, job_id)["state"] == "PENDING" and ticks < 60:
            report = run_tick(conn, 3)
            ticks += 1
            assert report.failed == report.retried == 0
    finally:
        runtime().close()
    job = job_row(conn, job_id)
    assert job["state"] == "COMPLETED" and job["continues"] >= 2 and job["attempts"] == 1
    assert {o.digest for o in store.list(TENANT)} == keep  # every orphan gone, nothing live
    epochs = conn.execute("SELECT state, deleted, holder_job_id FROM awc.gc_epochs").fetchall()
    assert epochs == [("COMPLETED", 300, job_id)]  # one epoch, resumed, never restarted
    assert store.reads <= 1.1 * 81, store.reads  # no tree read twice across the claims
    assert conn.execute("SELECT count(*) FROM awc.walk_marks").fetchone() == (0,)
