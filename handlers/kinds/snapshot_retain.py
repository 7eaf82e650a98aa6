"""`snapshot_retain` (SPEC §10.4): keep a snapshot, or mark it DELETED."""

from __future__ import annotations

from typing import Any

from tick import Complete, Fail, JobContext, handler

from ..runtime import runtime
from .payloads import SnapshotPayload
from .records import load_snapshot, set_snapshot_state

WORKSPACE = "SELECT state, keep_last FROM awc.workspaces WHERE id = %(id)s"

PINNED = "SELECT EXISTS (SELECT 1 FROM awc.gc_pins WHERE snapshot_id = %(id)s)"

# Is the snapshot older than the workspace's keep_last newest READY snapshots?
OUTSIDE_KEEP_LAST = """
SELECT count(*) >= %(keep)s
FROM awc.snapshots newer
WHERE newer.workspace_id = %(workspace_id)s
  AND newer.state = 'READY'
  AND newer.id <> %(id)s
  AND (newer.created_at, newer.id) > (SELECT created_at, id FROM awc.snapshots WHERE id = %(id)s)
"""


@handler("snapshot_retain", payload=SnapshotPayload)
def snapshot_retain(ctx: JobContext, payload: SnapshotPayload) -> Any:
    """DELETED when its workspace EXPIRED or it falls outside `keep_last`;
    DEGRADED and pinned snapshots are always kept."""
    rt = runtime()
    with rt.connection() as conn:
        snap = load_snapshot(conn, payload.snapshot_id)
        if snap is None:
            return Fail(f"snapshot {payload.snapshot_id} does not exist")
        if snap.state == "DELETED":
            return Complete({"skipped": "DELETED"})
        if snap.state == "DEGRADED":
            return Complete({"kept": "degraded"})
        pinned = conn.execute(PINNED, {"id": snap.id}).fetchone()
        if pinned and pinned[0]:
            return Complete({"kept": "pinned"})
        if snap.workspace_id is None:
            return Complete({"kept": "no workspace"})
        ws = conn.execute(WORKSPACE, {"id": snap.workspace_id}).fetchone()
        if ws is None:
            return Complete({"kept": "no workspace"})
        ws_state, keep_last = ws
        reason = None
        if ws_state == "EXPIRED":
            reason = "workspace expired"
        elif keep_last is not None:
            outside = conn.execute(OUTSIDE_KEEP_LAST, {
                "keep": keep_last, "workspace_id": snap.workspace_id, "id": snap.id,
            }).fetchone()
            if outside and outside[0]:
                reason = f"older than the {keep_last} newest READY snapshots"
        if reason is None:
            return Complete({"kept": "retained"})
        if not set_snapshot_state(conn, snap, "DELETED"):
            now = load_snapshot(conn, snap.id)
            return Complete({"skipped": now.state if now else "DELETED"})
    return Complete({"deleted": reason})
