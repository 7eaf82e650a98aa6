"""`snapshot_validate` (SPEC §10.1): is a VALIDATING snapshot's closure whole?"""

from __future__ import annotations

from typing import Any

from handlers.payloads import SnapshotPayload
from handlers.records import load_snapshot, set_snapshot_state
from handlers.runtime import pacer, runtime
from handlers.store import StoreError
from handlers.trees import walk_closure
from tick import Complete, Fail, JobContext, Retry, handler


@handler("snapshot_validate", payload=SnapshotPayload, lease_secs=600)
def snapshot_validate(ctx: JobContext, payload: SnapshotPayload) -> Any:
    """Walk the closure from the root, hashing every object: READY when
    closed, FAILED with a verdict naming missing and corrupt digests."""
    rt = runtime()
    with rt.connection() as conn:
        snap = load_snapshot(conn, payload.snapshot_id)
    if snap is None:
        return Fail(f"snapshot {payload.snapshot_id} does not exist")
    if snap.state != "VALIDATING":
        return Complete({"skipped": snap.state})
    try:
        walk = walk_closure(rt.store, snap.tenant_id, snap.root_digest, between=pacer(ctx))
    except StoreError as error:
        return Retry(f"object store: {error}")
    verdict = walk.verdict()
    with rt.connection() as conn:
        if not set_snapshot_state(conn, snap, "READY" if verdict["closed"] else "FAILED",
                                  verdict):
            now = load_snapshot(conn, snap.id)
            return Complete({"skipped": now.state if now else "DELETED"})
    return Complete(verdict)
