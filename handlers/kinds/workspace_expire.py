"""`workspace_expire` (SPEC §10.3): one step of the workspace TTL machine."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tick import Complete, Fail, JobContext, handler

from ..runtime import runtime
from .payloads import WorkspacePayload
from .records import NEXT_VERSION
from .ttl import next_step

LOAD = """
SELECT state, expires_at, expiring_since, version, now()
FROM awc.workspaces WHERE id = %(id)s
"""

ADVANCE = f"""
UPDATE awc.workspaces
SET state = %(state)s,
    -- EXPIRED keeps the start it was read with: read back, an instant Python
    -- cannot hold (`-infinity`, before the year 1) came as year 1.
    expiring_since = CASE WHEN %(state)s = 'EXPIRED' THEN expiring_since ELSE %(since)s END,
    version = {NEXT_VERSION}, updated_at = now()
WHERE id = %(id)s AND version = %(version)s
RETURNING state
"""


@handler("workspace_expire", payload=WorkspacePayload)
def workspace_expire(ctx: JobContext, payload: WorkspacePayload) -> Any:
    """Advance the workspace one step if one is due; otherwise change nothing."""
    rt = runtime()
    grace = timedelta(seconds=rt.settings.retention_grace_secs)
    with rt.connection() as conn:
        row = conn.execute(LOAD, {"id": payload.workspace_id}).fetchone()
        if row is None:
            return Fail(f"workspace {payload.workspace_id} does not exist")
        state, expires_at, since, version, now = row
        step = next_step(state, expires_at, since, now, grace)
        if step is None:
            return Complete({"state": state, "changed": False})
        moved = conn.execute(ADVANCE, {"state": step.state, "since": step.expiring_since,
                                       "id": payload.workspace_id, "version": version}).fetchone()
    if moved is None:  # another run advanced it first
        return Complete({"state": state, "changed": False, "raced": True})
    return Complete({"state": step.state, "changed": True, "from": state})
