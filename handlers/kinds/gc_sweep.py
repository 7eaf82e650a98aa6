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

An epoch longer than a tick goes on across claims of its job (SPEC §17,
docs/decisions/0011). The mark is one journaled walk over every live
snapshot's closure (`handlers.journal`), so what an earlier claim learnt
about trees is not read again; a claim near its deadline writes the journal
and returns `Continue()`. The next claim re-binds the epoch to its own claim
token, keeps the epoch's grace cutoff, and trusts nothing else the earlier
claim decided: candidates are listed again, and each delete batch re-marks
and re-checks under the tenant lock as always.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from tick import Complete, Continue, Fail, JobCancelled, JobContext, Retry, handler

from ..journal import Journal
from ..runtime import Runtime, pacer, runtime
from ..stores.base import StoreError, StoreRefused
from ..trees import Walk, walk_closure
from . import KINDS
from .payloads import TenantPayload

DELETE_CHUNK = 100
# Deletes refused in a row before the store, not its objects, is taken to
# be at fault (read-only, unreachable): the epoch is aborted then.
REFUSED_IN_A_ROW = 3

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

# A later claim of the epoch's own job takes the epoch over (SPEC §17): the
# earlier claim's token no longer matches, so its deletes are refused.
REBIND_EPOCH = """
UPDATE awc.gc_epochs SET holder_token = %(token)s
WHERE id = %(id)s AND tenant_id = %(tenant)s AND holder_job_id = %(job_id)s
  AND state = 'RUNNING'
RETURNING id
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

GRACE_CUTOFF = "SELECT now() - make_interval(secs => %(secs)s::float8)"


class EpochLost(Exception):
    """Another sweep took this tenant's epoch over."""


class MarkIncomplete(Exception):
    """A live snapshot has a missing or corrupt tree: its children are unknown."""


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
    journal: Journal
    walk: Walk = field(default_factory=lambda: Walk(journaled=True))
    planned: set[UUID] = field(default_factory=set)  # live snapshots whose roots are walked
    # Live snapshots whose own closures reach none of these corrupt trees.
    cleared: dict[UUID, frozenset[str]] = field(default_factory=dict)
    mark: set[str] = field(default_factory=set)
    deleted_before_loss: int = 0  # deletes of the batch whose lock was lost
    # Objects the store would not delete (an immutable file, S3 Object Lock):
    # passed over and named, so that one of them stops no tenant's GC.
    undeletable: dict[str, str] = field(default_factory=dict)
    refused_in_a_row: int = 0

    def remark(self, conn: Any, *, pause: bool = False) -> set[str] | None:
        """Extend the mark with the closures of live snapshots not walked yet
        (one walk, so a shared subtree is read once), and all pins; return
        what was added. With `pause`, the walk may stop near the claim's
        deadline, having written its journal: then None."""
        live = conn.execute(LIVE_SNAPSHOTS, {"tenant": self.tenant}).fetchall()
        self.walk.revisit()  # what was missing or corrupt may be there now
        for snap_id, root, _ in live:
            if snap_id not in self.planned:
                self.walk.plan(root, "tree")
                self.planned.add(snap_id)
        walk_closure(self.rt.store, self.tenant, "", verify=False, between=self.between,
                     walk=self.walk, pause=self.journal.pause if pause else None)
        if self.journal.paused:
            return None
        self._check_unparsed(live)
        added = self.walk.seen - self.mark
        for (digest,) in conn.execute(PINS, {"tenant": self.tenant}):
            if digest not in self.mark:
                added.add(digest)
        self.mark |= added
        return added

    def _check_unparsed(self, live: list[tuple[UUID, str, str]]) -> None:
        """A tree that does not parse, or that the store does not return,
        hides its children: harmless under a FAILED or DEGRADED snapshot,
        fatal to the epoch if any other live snapshot reaches it. A missing
        tree is no proof its children are garbage: the store may be
        answering 404 for a moment, or the tree be uploaded again, and its
        blobs were deleted so. Rare, so each snapshot is walked on its own."""
        unparsed = frozenset(self.walk.corrupt | _missing_trees(self.walk))
        if not unparsed:
            return
        for snap_id, root, state in live:
            # Checked again when it is new, or corrupt trees were found since:
            # a snapshot registered while the epoch ran may reach a tree
            # already found harmless under a FAILED one.
            if state in ("FAILED", "DEGRADED") or unparsed <= self.cleared.get(snap_id, set()):
                continue
            own = walk_closure(self.rt.store, self.tenant, root, verify=False,
                               between=self.between)
            if own.corrupt:
                raise MarkIncomplete(f"snapshot {snap_id} has a corrupt tree (it does not parse "
                                     "or does not hash to its digest)")
            if _missing_trees(own):
                raise MarkIncomplete(f"snapshot {snap_id} has a tree the store does not return "
                                     "(its children are unknown; a scrub marks the snapshot "
                                     "DEGRADED if it is lost)")
            self.cleared[snap_id] = unparsed

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
                    # A run cut at its deadline or cancelled deletes no more
                    # (SPEC §26): its thread is abandoned, not stopped, and
                    # went on deleting for minutes against a slow store.
                    self.between()
                    conn.execute(LOCK_HELD)  # raises once the session is gone
                    try:
                        self.rt.store.delete(self.tenant, digest)
                    except StoreError as error:
                        self.undeletable[digest] = str(error)
                        self.refused_in_a_row += 1
                        if self.refused_in_a_row >= REFUSED_IN_A_ROW:
                            raise  # the store, not an object: the epoch is aborted
                        continue
                    deleted += 1
                    self.refused_in_a_row = 0
        except psycopg.Error as error:
            self.deleted_before_loss = deleted
            raise LockLost(f"lost the tenant lock's session ({type(error).__name__})") from None
        except BaseException:
            self.deleted_before_loss = deleted  # counted by whoever ends the epoch
            raise
        return deleted


def _missing_trees(walk: Walk) -> set[str]:
    """The trees `walk` found missing (a missing blob hides nothing)."""
    return {digest for digest, kind in walk.visited if kind == "tree" and digest in walk.missing}


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


def _resumed(rt: Runtime, ctx: JobContext, tenant: str) -> dict[str, Any] | None:
    """The epoch an earlier claim of this job saved, now this claim's; None
    if there is none, or it ended, or the saved state is not one we wrote."""
    saved = ctx.saved
    if not isinstance(saved, dict):
        return None
    epoch, cutoff, deleted = saved.get("epoch"), saved.get("cutoff"), saved.get("deleted")
    if not (isinstance(epoch, int) and isinstance(cutoff, float)
            and isinstance(deleted, int) and isinstance(saved.get("canary"), bool)):
        return None
    with rt.connection() as conn:
        row = conn.execute(REBIND_EPOCH, {"token": ctx.claim_token or None, "id": epoch,
                                          "tenant": tenant, "job_id": ctx.job_id}).fetchone()
    return None if row is None else dict(saved)


def _end(epoch: Epoch, state: str, counts: dict[str, int], error: str | None = None) -> None:
    with epoch.rt.connection() as conn, conn.transaction():
        conn.execute(END_EPOCH, {"state": state, "error": error, "id": epoch.id,
                                 "token": epoch.token, **counts})
        epoch.journal.forget(conn)


@handler("gc_sweep", payload=TenantPayload, lease_secs=KINDS["gc_sweep"])
def gc_sweep(ctx: JobContext, payload: TenantPayload) -> Any:
    """Mark, plan, delete a canary batch, re-mark, then delete the rest;
    across claims when the tenant is too large for one (SPEC §17)."""
    rt = runtime()
    tenant = payload.tenant_id
    settings = rt.settings
    with rt.connection() as conn:
        if conn.execute(TENANT_EXISTS, {"tenant": tenant}).fetchone() is None:
            return Fail(f"tenant {tenant!r} does not exist")
    state = _resumed(rt, ctx, tenant)
    if state is None:
        epoch_id = _start(rt, ctx, tenant, settings.gc_dry_run)
        if epoch_id is None:
            return Complete({"skipped": "epoch running"})
        # The database's clock, not this host's (decision 0022): a worker
        # whose clock ran hours ahead deleted objects younger than the grace.
        with rt.connection() as conn:
            (cutoff,) = conn.execute(GRACE_CUTOFF, {"secs": settings.gc_grace_secs}).fetchall()[0]
        state = {"epoch": epoch_id, "cutoff": cutoff.timestamp(), "canary": False, "deleted": 0}
    journal = Journal(ctx, rt, state)
    epoch = Epoch(rt, tenant, state["epoch"], ctx.claim_token,
                  cutoff=datetime.fromtimestamp(state["cutoff"], UTC), between=pacer(ctx),
                  journal=journal, walk=journal.restore(None))
    counts = {"marked": 0, "candidates": 0, "deleted": state["deleted"]}
    try:
        with rt.connection() as conn:
            if epoch.remark(conn, pause=True) is None:
                return Continue()
        return _sweep(epoch, state, counts)
    except EpochLost as error:
        return Fail(str(error))
    except LockLost as error:
        # The lock went with its session; what was deleted before was
        # deleted under it. The next sweep starts a fresh epoch.
        counts["deleted"] += epoch.deleted_before_loss
        _end(epoch, "ABORTED", counts, str(error))
        return Retry(f"GC epoch {epoch.id} aborted: {error}")
    except MarkIncomplete as error:
        _end(epoch, "ABORTED", counts, str(error))
        return Fail(f"GC epoch {epoch.id} aborted: {error}")
    except StoreRefused as error:
        counts["deleted"] += epoch.deleted_before_loss
        _end(epoch, "ABORTED", counts, f"object store refused: {error}"[:500])
        return Fail(f"GC epoch {epoch.id} aborted: object store: {error}")
    except StoreError as error:
        counts["deleted"] += epoch.deleted_before_loss
        _end(epoch, "ABORTED", counts, f"object store error: {error}"[:500])
        return Retry(f"object store: {error}")
    except JobCancelled:
        # Cut at the deadline or stopping: the epoch stays this job's, for
        # its next claim to resume from the checkpoint (or, if no claim
        # comes, for the next sweep to abort as stale).
        raise
    except BaseException:
        _end(epoch, "ABORTED", counts, "interrupted")
        raise


def _sweep(epoch: Epoch, state: dict[str, Any], counts: dict[str, int]) -> Any:
    """The epoch once marked: plan, canary, re-mark, delete the rest."""
    rt, settings, tenant = epoch.rt, epoch.rt.settings, epoch.tenant
    counts["marked"] = len(epoch.mark)
    candidates = []
    for info in rt.store.list(tenant):
        epoch.between()
        if info.digest not in epoch.mark and info.last_modified < epoch.cutoff:
            candidates.append(info.digest)
    counts["candidates"] = len(candidates)
    # In no fixed order: three objects the store will not delete, first in
    # every listing, would abort every epoch of the tenant (REFUSED_IN_A_ROW).
    random.shuffle(candidates)
    planned = candidates[: max(settings.gc_batch_size - state["deleted"], 0)]
    if settings.gc_dry_run:
        _end(epoch, "COMPLETED", counts)
        return Complete({"epoch": epoch.id, "dry_run": True, **counts,
                         "would_delete": len(planned)})
    rest = planned
    if not state["canary"]:
        canary, rest = planned[: settings.gc_canary_size], planned[settings.gc_canary_size:]
        counts["deleted"] += epoch.delete(canary)
        with rt.connection() as conn:
            revived = (epoch.remark(conn) or set()) & set(candidates)
        if revived:
            error = f"{len(revived)} candidates became reachable during the epoch"
            _end(epoch, "ABORTED", counts, error)
            return Fail(f"GC epoch {epoch.id} aborted: {error}")
        state["canary"] = True
    for start in range(0, len(rest), DELETE_CHUNK):
        epoch.between()
        if epoch.journal.near_deadline():
            state["deleted"] = counts["deleted"]
            epoch.journal.write(epoch.walk)
            return Continue()
        began = time.monotonic()
        counts["deleted"] += epoch.delete(rest[start:start + DELETE_CHUNK])
        epoch.journal.took(time.monotonic() - began)
    counts["marked"] = len(epoch.mark)
    kept = epoch.undeletable
    first = next(iter(kept.items()), None)
    _end(epoch, "COMPLETED", counts, None if first is None else (
        f"{len(kept)} objects the store did not delete (left for a later epoch), such as "
        f"{first[0]}: "
        f"{first[1]}")[:500])
    return Complete({"epoch": epoch.id, "dry_run": False, **counts,
                     **({"undeletable": len(kept)} if kept else {})})
