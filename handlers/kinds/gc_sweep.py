"""`gc_sweep` (SPEC §10.5): one durable GC epoch for a tenant.

Safety (docs/decisions/0004): objects are deleted only inside a short
transaction that holds the tenant row `FOR UPDATE`. Uploads hold `FOR KEY
SHARE` on the same row from their first write to their snapshot's commit
(`handlers.producer.upload`), so an upload and a deletion batch never
overlap, and each batch first re-marks the snapshots registered since the
epoch's mark. Each candidate is re-read from the store just before deletion
and skipped if it was rewritten inside the grace.

The lock lives as long as the session that took it. A session can be lost
mid-batch (idle-in-transaction timeout, failover, `pg_terminate_backend`)
while the store deletes go on, and a producer may then reuse a candidate.
So every single delete is preceded by a round trip on the lock's own
transaction: only its answer proves the lock is still held, and without
it the epoch is aborted before the next delete, never after (SPEC §10.5).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from tick import Complete, Fail, JobContext, Retry, handler

from ..runtime import Runtime, pacer, runtime
from ..stores.base import StoreError, StoreRefused
from ..trees import walk_closure
from .payloads import TenantPayload

DELETE_CHUNK = 100

TENANT_EXISTS = "SELECT 1 FROM awc.tenants WHERE id = %(tenant)s"

START_EPOCH = """
INSERT INTO awc.gc_epochs (tenant_id, dry_run, holder_job_id, holder_token)
VALUES (%(tenant)s, %(dry_run)s, %(job_id)s, %(token)s)
ON CONFLICT (tenant_id) WHERE state = 'RUNNING' DO NOTHING
RETURNING id
"""

# The running epoch of a tenant, and whether its holder still holds its job.
RUNNING_EPOCH = """
SELECT e.id,
       EXISTS (SELECT 1 FROM awc.jobs AS j
               WHERE j.id = e.holder_job_id AND j.claim_token = e.holder_token
                 AND j.state = 'RUNNING')
FROM awc.gc_epochs AS e
WHERE e.tenant_id = %(tenant)s AND e.state = 'RUNNING'
FOR UPDATE OF e
"""

ABORT_STALE_EPOCH = """
UPDATE awc.gc_epochs
SET state = 'ABORTED', finished_at = now(), error = 'holder lost its lease'
WHERE id = %(id)s AND state = 'RUNNING'
"""

# Every later write is fenced on this claim's token.
END_EPOCH = """
UPDATE awc.gc_epochs
SET state = %(state)s, marked = %(marked)s, candidates = %(candidates)s,
    deleted = %(deleted)s, error = %(error)s, finished_at = now()
WHERE id = %(id)s AND state = 'RUNNING' AND holder_token = %(token)s
"""

LOCK_TENANT = "SELECT 1 FROM awc.tenants WHERE id = %(tenant)s FOR UPDATE"

STILL_HOLDER = """
SELECT 1 FROM awc.gc_epochs
WHERE id = %(id)s AND state = 'RUNNING' AND holder_token = %(token)s
"""

LIVE_SNAPSHOTS = """
SELECT id, root_digest, state FROM awc.snapshots
WHERE tenant_id = %(tenant)s AND state <> 'DELETED'
"""

PINS = "SELECT digest FROM awc.gc_pins WHERE tenant_id = %(tenant)s"


class EpochLost(Exception):
    """Another sweep took this tenant's epoch over."""


class MarkIncomplete(Exception):
    """A live snapshot has a tree that does not parse: its children are unknown."""


class LockLost(Exception):
    """The session holding the tenant lock is gone: no delete may follow."""


# Asked on the lock's own transaction before each delete: an answer proves
# the session, and so its row lock, is still there.
LOCK_HELD = "SELECT 1"


@dataclass
class Epoch:
    """One sweep's state."""

    rt: Runtime
    tenant: str
    id: int
    token: str
    cutoff: datetime
    between: Callable[[], None]
    marked_snapshots: set[UUID] = field(default_factory=set)
    mark: set[str] = field(default_factory=set)
    deleted_before_loss: int = 0  # deletes of the batch whose lock was lost

    def remark(self, conn: Any) -> set[str]:
        """Extend the mark with snapshots registered since, and all pins;
        return what was added."""
        added: set[str] = set()
        for snap_id, root, state in conn.execute(LIVE_SNAPSHOTS, {"tenant": self.tenant}):
            if snap_id in self.marked_snapshots:
                continue
            walk = walk_closure(self.rt.store, self.tenant, root, verify=False,
                                between=self.between)
            if walk.corrupt and state not in ("FAILED", "DEGRADED"):
                raise MarkIncomplete(f"snapshot {snap_id} has a tree that does not parse")
            added |= walk.seen - self.mark
            self.mark |= walk.seen
            self.marked_snapshots.add(snap_id)
        for (digest,) in conn.execute(PINS, {"tenant": self.tenant}):
            if digest not in self.mark:
                added.add(digest)
                self.mark.add(digest)
        return added

    def delete(self, digests: Iterable[str]) -> int:
        """Delete those of `digests` still unreachable and old, under the tenant lock."""
        import psycopg

        deleted = 0
        try:
            with self.rt.connection() as conn, conn.transaction():
                conn.execute(LOCK_TENANT, {"tenant": self.tenant})
                if conn.execute(STILL_HOLDER, {"id": self.id, "token": self.token}
                                ).fetchone() is None:
                    raise EpochLost(f"epoch {self.id} was taken over")
                self.remark(conn)
                for digest in digests:
                    if digest in self.mark:
                        continue
                    info = self.rt.store.head(self.tenant, digest)
                    if info is None or info.last_modified >= self.cutoff:
                        continue  # gone already, or rewritten inside the grace
                    conn.execute(LOCK_HELD)  # raises once the session is gone
                    self.rt.store.delete(self.tenant, digest)
                    deleted += 1
        except psycopg.Error as error:
            self.deleted_before_loss = deleted
            raise LockLost(f"lost the tenant lock's session ({type(error).__name__})") from None
        return deleted


def _start(rt: Runtime, ctx: JobContext, tenant: str, dry_run: bool) -> int | None:
    """Open an epoch for `tenant`, or None when a live sweep holds it."""
    params = {"tenant": tenant, "dry_run": dry_run, "job_id": ctx.job_id,
              "token": ctx.claim_token or None}
    with rt.connection() as conn, conn.transaction():
        row = conn.execute(START_EPOCH, params).fetchone()
        if row is not None:
            return int(row[0])
        running = conn.execute(RUNNING_EPOCH, {"tenant": tenant}).fetchone()
        if running is not None:
            if running[1]:
                return None
            conn.execute(ABORT_STALE_EPOCH, {"id": running[0]})
        row = conn.execute(START_EPOCH, params).fetchone()
        return None if row is None else int(row[0])


def _end(epoch: Epoch, state: str, counts: dict[str, int], error: str | None = None) -> None:
    with epoch.rt.connection() as conn:
        conn.execute(END_EPOCH, {"state": state, "error": error, "id": epoch.id,
                                 "token": epoch.token, **counts})


@handler("gc_sweep", payload=TenantPayload, lease_secs=900)
def gc_sweep(ctx: JobContext, payload: TenantPayload) -> Any:
    """Mark, plan, delete a canary batch, re-mark, then delete the rest."""
    rt = runtime()
    tenant = payload.tenant_id
    settings = rt.settings
    with rt.connection() as conn:
        if conn.execute(TENANT_EXISTS, {"tenant": tenant}).fetchone() is None:
            return Fail(f"tenant {tenant!r} does not exist")
    epoch_id = _start(rt, ctx, tenant, settings.gc_dry_run)
    if epoch_id is None:
        return Complete({"skipped": "epoch running"})
    epoch = Epoch(rt, tenant, epoch_id, ctx.claim_token,
                  cutoff=datetime.now(UTC) - timedelta(seconds=settings.gc_grace_secs),
                  between=pacer(ctx))
    counts = {"marked": 0, "candidates": 0, "deleted": 0}
    try:
        with rt.connection() as conn:
            epoch.remark(conn)
        counts["marked"] = len(epoch.mark)
        candidates = []
        for info in rt.store.list(tenant):
            epoch.between()
            if info.digest not in epoch.mark and info.last_modified < epoch.cutoff:
                candidates.append(info.digest)
        counts["candidates"] = len(candidates)
        planned = candidates[: settings.gc_batch_size]
        if settings.gc_dry_run:
            _end(epoch, "COMPLETED", counts)
            return Complete({"epoch": epoch_id, "dry_run": True, **counts,
                             "would_delete": len(planned)})
        canary, rest = planned[: settings.gc_canary_size], planned[settings.gc_canary_size:]
        counts["deleted"] = epoch.delete(canary)
        with rt.connection() as conn:
            revived = epoch.remark(conn) & set(candidates)
        if revived:
            error = f"{len(revived)} candidates became reachable during the epoch"
            _end(epoch, "ABORTED", counts, error)
            return Fail(f"GC epoch {epoch_id} aborted: {error}")
        for start in range(0, len(rest), DELETE_CHUNK):
            epoch.between()
            counts["deleted"] += epoch.delete(rest[start:start + DELETE_CHUNK])
        counts["marked"] = len(epoch.mark)
        _end(epoch, "COMPLETED", counts)
        return Complete({"epoch": epoch_id, "dry_run": False, **counts})
    except EpochLost as error:
        return Fail(str(error))
    except LockLost as error:
        # The lock went with its session; what was deleted before was
        # deleted under it. The next sweep starts a fresh epoch.
        counts["deleted"] += epoch.deleted_before_loss
        _end(epoch, "ABORTED", counts, str(error))
        return Retry(f"GC epoch {epoch_id} aborted: {error}")
    except MarkIncomplete as error:
        _end(epoch, "ABORTED", counts, str(error))
        return Fail(f"GC epoch {epoch_id} aborted: {error}")
    except StoreRefused as error:
        _end(epoch, "ABORTED", counts, "object store refused")
        return Fail(f"GC epoch {epoch_id} aborted: object store: {error}")
    except StoreError as error:
        _end(epoch, "ABORTED", counts, "object store error")
        return Retry(f"object store: {error}")
    except BaseException:
        _end(epoch, "ABORTED", counts, "interrupted")
        raise
