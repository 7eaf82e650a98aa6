"""`snapshot_validate` (SPEC §10.1): is a VALIDATING snapshot's closure whole?"""

from __future__ import annotations

from typing import Any

from tick import Complete, JobContext, handler

from ..runtime import runtime
from . import KINDS
from .payloads import SnapshotPayload
from .records import load_snapshot, set_snapshot_state, walk_snapshot


@handler("snapshot_validate", payload=SnapshotPayload, lease_secs=KINDS["snapshot_validate"])
def snapshot_validate(ctx: JobContext, payload: SnapshotPayload) -> Any:
    """Walk the closure from the root, hashing every object: READY when
    closed, FAILED with a verdict naming missing and corrupt digests. A
    closure too large for one tick is walked across claims (SPEC §17)."""
    found = walk_snapshot(ctx, payload.snapshot_id, "VALIDATING")
    if not isinstance(found, tuple):
        return found
    snap, walk, journal = found
    verdict = walk.verdict()
    with runtime().connection() as conn, conn.transaction():
        journal.forget(conn)
        if not set_snapshot_state(conn, snap, "READY" if verdict["closed"] else "FAILED",
                                  verdict):
            now = load_snapshot(conn, snap.id)
            return Complete({"skipped": now.state if now else "DELETED"})
    return Complete(verdict)
