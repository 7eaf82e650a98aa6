"""The producer side of the AWC records (SPEC §10, §11), for control planes
written in Python, the demo and the tests.

The upload protocol that keeps GC safe (docs/decisions/0004): in one
transaction, take `FOR KEY SHARE` on the tenant row, write every object of
the snapshot, register the snapshot, commit. GC deletes only under
`FOR UPDATE` on the same row, so an upload and a deletion batch never
overlap: objects an upload found present stay present until its snapshot is
registered, and a deletion batch re-marks every snapshot registered before
it. `upload()` does exactly this. Control planes in other languages do the
same in SQL:

    BEGIN;
    SELECT 1 FROM awc.tenants WHERE id = $1 FOR KEY SHARE;
    -- put every object of the tree (or check it is present)
    INSERT INTO awc.snapshots (tenant_id, workspace_id, root_digest) VALUES (...);
    INSERT INTO awc.jobs (kind, payload) VALUES ('snapshot_validate', ...);
    COMMIT;
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from tick.producer import enqueue

from .stores.base import ObjectStore
from .trees import TreeSpec, write_tree

if TYPE_CHECKING:
    import psycopg

UPLOAD_LOCK = "SELECT 1 FROM awc.tenants WHERE id = %(id)s FOR KEY SHARE"

ENSURE_TENANT = "INSERT INTO awc.tenants (id) VALUES (%(id)s) ON CONFLICT (id) DO NOTHING"

NEW_WORKSPACE = """
INSERT INTO awc.workspaces (tenant_id, expires_at, keep_last)
VALUES (%(tenant_id)s, %(expires_at)s, %(keep_last)s)
RETURNING id
"""

NEW_SNAPSHOT = """
INSERT INTO awc.snapshots (tenant_id, workspace_id, root_digest, state)
VALUES (%(tenant_id)s, %(workspace_id)s, %(root)s, %(state)s)
RETURNING id
"""


def ensure_tenant(conn: psycopg.Connection[Any], tenant_id: str) -> None:
    """Create the tenant if it does not exist."""
    conn.execute(ENSURE_TENANT, {"id": tenant_id})


def create_workspace(
    conn: psycopg.Connection[Any],
    tenant_id: str,
    expires_at: datetime,
    keep_last: int | None = None,
) -> UUID:
    """A new ACTIVE workspace."""
    row = conn.execute(NEW_WORKSPACE, {"tenant_id": tenant_id, "expires_at": expires_at,
                                       "keep_last": keep_last}).fetchone()
    assert row is not None
    return UUID(str(row[0]))


def register_snapshot(
    conn: psycopg.Connection[Any],
    tenant_id: str,
    root_digest: str,
    workspace_id: UUID | None = None,
    *,
    validate: bool = True,
    state: str = "VALIDATING",
) -> UUID:
    """Register a snapshot of content already in the store; with `validate`,
    enqueue its `snapshot_validate` job in the same transaction."""
    with conn.transaction():
        row = conn.execute(NEW_SNAPSHOT, {"tenant_id": tenant_id, "workspace_id": workspace_id,
                                          "root": root_digest, "state": state}).fetchone()
        assert row is not None
        snapshot_id = UUID(str(row[0]))
        if validate:
            enqueue(conn, "snapshot_validate", {"snapshot_id": str(snapshot_id)},
                    dedupe_key=f"snapshot_validate:{snapshot_id}")
    return snapshot_id


def upload(
    conn: psycopg.Connection[Any],
    store: ObjectStore,
    tenant_id: str,
    tree: TreeSpec,
    workspace_id: UUID | None = None,
    *,
    validate: bool = True,
) -> tuple[str, UUID]:
    """Write `tree` and register its snapshot under the upload protocol.

    Returns (root digest, snapshot id). `conn` must not be inside a
    transaction already: the lock must end with the registration's commit.
    """
    with conn.transaction():
        if conn.execute(UPLOAD_LOCK, {"id": tenant_id}).fetchone() is None:
            raise ValueError(f"tenant {tenant_id!r} does not exist")
        root = write_tree(store, tenant_id, tree)
        snapshot_id = register_snapshot(conn, tenant_id, root, workspace_id, validate=validate)
    return root, snapshot_id
