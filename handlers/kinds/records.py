"""Reading and writing the domain records (SPEC §10) the handlers share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from tick import Complete, Continue, Fail, Retry

if TYPE_CHECKING:
    import psycopg

    from tick import JobContext

    from ..journal import Journal
    from ..trees import Walk

LOAD_SNAPSHOT = """
SELECT id, tenant_id, workspace_id, root_digest, state, version
FROM awc.snapshots WHERE id = %(id)s
"""

# Every record write is a compare-and-set on version and state: a duplicate or
# stale run matches nothing and changes nothing. The version counts on past
# an integer's last value by wrapping to its first (`NEXT_VERSION`): adding
# one failed there, and the job was retried as if the failure would pass.
NEXT_VERSION = "CASE WHEN version = 2147483647 THEN -2147483648 ELSE version + 1 END"

SET_SNAPSHOT_STATE = f"""
UPDATE awc.snapshots
SET state = %(state)s, verdict = coalesce(%(verdict)s, verdict),
    version = {NEXT_VERSION}, updated_at = now()
WHERE id = %(id)s AND version = %(version)s AND state = %(expected)s
RETURNING version
"""

INSERT_AUDIT = """
INSERT INTO awc.audit_events (tenant_id, event, subject, detail, job_id)
VALUES (%(tenant_id)s, %(event)s, %(subject)s, %(detail)s, %(job_id)s)
ON CONFLICT (job_id, event) WHERE job_id IS NOT NULL DO NOTHING
"""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A snapshot row as the handlers need it."""

    id: UUID
    tenant_id: str
    workspace_id: UUID | None
    root_digest: str
    state: str
    version: int


def load_snapshot(conn: psycopg.Connection[Any], snapshot_id: UUID) -> Snapshot | None:
    """The snapshot, or None if it does not exist."""
    row = conn.execute(LOAD_SNAPSHOT, {"id": snapshot_id}).fetchone()
    return None if row is None else Snapshot(*row)


def set_snapshot_state(
    conn: psycopg.Connection[Any],
    snap: Snapshot,
    state: str,
    verdict: dict[str, Any] | None = None,
) -> bool:
    """Move `snap` to `state` if nobody else moved it first."""
    from psycopg.types.json import Jsonb

    row = conn.execute(SET_SNAPSHOT_STATE, {
        "state": state,
        "verdict": None if verdict is None else Jsonb(verdict),
        "id": snap.id,
        "version": snap.version,
        "expected": snap.state,
    }).fetchone()
    return row is not None


def audit(
    conn: psycopg.Connection[Any],
    *,
    tenant_id: str,
    event: str,
    subject: str,
    detail: dict[str, Any],
    job_id: int,
) -> None:
    """Record an audit event once per job."""
    from psycopg.types.json import Jsonb

    conn.execute(INSERT_AUDIT, {"tenant_id": tenant_id, "event": event, "subject": subject,
                                "detail": Jsonb(detail), "job_id": job_id})


def walk_snapshot(
    ctx: JobContext, snapshot_id: UUID, expected_state: str
) -> tuple[Snapshot, Walk, Journal] | Complete | Continue | Fail | Retry:
    """Load a snapshot and walk its closure, hashing every object, from where
    an earlier claim's journal left off (SPEC §17).

    Returns the snapshot, the walk and its journal, or the outcome that ends
    the claim early: Continue when the walk must go on in a later claim,
    Fail for a missing snapshot, Complete({"skipped": state}) for one not in
    `expected_state`, Retry for a store outage.
    """
    from ..journal import Journal
    from ..runtime import pacer, runtime
    from ..stores.base import StoreError, StoreRefused
    from ..trees import walk_closure

    rt = runtime()
    with rt.connection() as conn:
        snap = load_snapshot(conn, snapshot_id)
    if snap is None:
        return Fail(f"snapshot {snapshot_id} does not exist")
    if snap.state != expected_state:
        return Complete({"skipped": snap.state})
    journal = Journal(ctx, rt)
    try:
        walk = walk_closure(rt.store, snap.tenant_id, snap.root_digest, between=pacer(ctx),
                            walk=journal.restore(snap.root_digest), pause=journal.pause)
    except StoreRefused as error:
        return Fail(f"object store: {error}")
    except StoreError as error:
        return Retry(f"object store: {error}")
    if journal.paused:
        return Continue()
    return snap, walk, journal
