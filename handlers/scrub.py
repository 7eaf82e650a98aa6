"""`snapshot_scrub` (SPEC §10.2): re-verify a READY snapshot's objects."""

from __future__ import annotations

from typing import Any

from handlers.payloads import SnapshotPayload
from handlers.records import audit, load_snapshot, set_snapshot_state
from handlers.runtime import pacer, runtime
from handlers.store import StoreError
from handlers.trees import walk_closure
from tick import Complete, Fail, JobContext, Retry, handler

PIN_SURVIVORS = """
INSERT INTO awc.gc_pins (tenant_id, digest, snapshot_id, reason)
SELECT %(tenant_id)s, digest, %(snapshot_id)s, 'degraded'
FROM unnest(%(digests)s::text[]) AS digest
ON CONFLICT (tenant_id, digest, reason) DO NOTHING
"""


@handler("snapshot_scrub", payload=SnapshotPayload, lease_secs=600)
def snapshot_scrub(ctx: JobContext, payload: SnapshotPayload) -> Any:
    """Decayed: DEGRADED, and every surviving object pinned against GC.
    Either way one `snapshot.scrub` audit event. Decay is recorded, not
    repaired: no recovery store is wired."""
    rt = runtime()
    with rt.connection() as conn:
        snap = load_snapshot(conn, payload.snapshot_id)
    if snap is None:
        return Fail(f"snapshot {payload.snapshot_id} does not exist")
    if snap.state != "READY":
        return Complete({"skipped": snap.state})
    try:
        walk = walk_closure(rt.store, snap.tenant_id, snap.root_digest, between=pacer(ctx))
    except StoreError as error:
        return Retry(f"object store: {error}")
    verdict = walk.verdict()
    with rt.connection() as conn, conn.transaction():
        if not verdict["closed"]:
            if not set_snapshot_state(conn, snap, "DEGRADED", verdict):
                now = load_snapshot(conn, snap.id)
                return Complete({"skipped": now.state if now else "DELETED"})
            conn.execute(PIN_SURVIVORS, {"tenant_id": snap.tenant_id, "snapshot_id": snap.id,
                                         "digests": sorted(walk.present)})
        audit(conn, tenant_id=snap.tenant_id, event="snapshot.scrub", subject=str(snap.id),
              detail=verdict, job_id=ctx.job_id)
    return Complete(verdict)
