"""`snapshot_scrub` (SPEC §10.2): re-verify a READY snapshot's objects."""

from __future__ import annotations

from typing import Any

from tick import Complete, JobContext, handler

from ..runtime import runtime
from . import KINDS
from .payloads import SnapshotPayload
from .records import audit, load_snapshot, set_snapshot_state, walk_snapshot

PIN_SURVIVORS = """
INSERT INTO awc.gc_pins (tenant_id, digest, snapshot_id, reason)
SELECT %(tenant_id)s, digest, %(snapshot_id)s, 'degraded'
FROM unnest(%(digests)s::text[]) AS digest
ON CONFLICT (tenant_id, digest, reason) DO NOTHING
"""


@handler("snapshot_scrub", payload=SnapshotPayload, lease_secs=KINDS["snapshot_scrub"])
def snapshot_scrub(ctx: JobContext, payload: SnapshotPayload) -> Any:
    """Decayed: DEGRADED, and every surviving object pinned against GC.
    Either way one `snapshot.scrub` audit event. Decay is recorded, not
    repaired: no recovery store is wired. A closure too large for one tick
    is walked across claims (SPEC §17)."""
    found = walk_snapshot(ctx, payload.snapshot_id, "READY")
    if not isinstance(found, tuple):
        return found
    snap, walk, journal = found
    verdict = walk.verdict()
    with runtime().connection() as conn, conn.transaction():
        journal.forget(conn)
        if not verdict["closed"]:
            if not set_snapshot_state(conn, snap, "DEGRADED", verdict):
                now = load_snapshot(conn, snap.id)
                return Complete({"skipped": now.state if now else "DELETED"})
            conn.execute(PIN_SURVIVORS, {"tenant_id": snap.tenant_id, "snapshot_id": snap.id,
                                         "digests": sorted(walk.present)})
        audit(conn, tenant_id=snap.tenant_id, event="snapshot.scrub", subject=str(snap.id),
              detail=verdict, job_id=ctx.job_id)
    return Complete(verdict)
