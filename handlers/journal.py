"""A closure walk that spans claims (SPEC §17, docs/decisions/0011).

A snapshot's closure can be too large to walk in one tick. The walk keeps
a journal in `awc.walk_marks`: every (digest, type) it visited with what it
found, and every one it has still to visit. Every few seconds the findings
since the last write go to the journal in one statement, fenced on the
job's current claim, then a checkpoint records the walk's progress. Near
its deadline the walk writes what it has and the handler returns
`Continue()`; the next claim of the job reads the journal back and goes on,
re-reading nothing the journal holds.

What a journal may hold is a fact about content-addressed bytes ("these
bytes hash to their digest", "this tree lists these children"), true
whenever it was learnt. What it must not hold is anything about time or
ownership: GC's candidates, the grace cutoff and the tenant lock are decided
again by the claim that deletes (see gc_sweep).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tick import LeaseLost

from .trees import Walk

if TYPE_CHECKING:
    from tick import JobContext

    from .runtime import Runtime

# Write the findings this often, or once this many are waiting.
WRITE_EVERY_SECS = 2.0
WRITE_EVERY_FINDINGS = 20_000
# Hand the rest to the next claim when this little time is left; never less
# than three times what the last journal write took.
PAUSE_MARGIN_SECS = 1.0

RESTORE = "SELECT digest, type, status FROM awc.walk_marks WHERE job_id = %(job)s"

# Fenced: written only while the job is this claim's (the FOR SHARE row lock
# keeps a new claim from taking the job until the write commits). A finding
# never goes back to `todo`.
WRITE = """
WITH holder AS (
    SELECT 1 FROM awc.jobs
    WHERE id = %(job)s AND claim_token = %(token)s::uuid AND state = 'RUNNING'
    FOR SHARE
), written AS (
    INSERT INTO awc.walk_marks (job_id, digest, type, status)
    SELECT %(job)s, n.digest, n.type, n.status
    FROM unnest(%(digests)s::text[], %(types)s::text[], %(statuses)s::text[])
        AS n (digest, type, status)
    WHERE EXISTS (SELECT 1 FROM holder)
    ON CONFLICT (job_id, digest, type) DO UPDATE SET status = EXCLUDED.status
    WHERE awc.walk_marks.status = 'todo'
    RETURNING 1
)
SELECT (SELECT count(*) FROM holder), (SELECT count(*) FROM written)
"""

FORGET = "DELETE FROM awc.walk_marks WHERE job_id = %(job)s"


class Journal:
    """The journal of one job's walk, as its current claim sees it."""

    def __init__(self, ctx: JobContext, rt: Runtime,
                 state: dict[str, Any] | None = None) -> None:
        self.ctx = ctx
        self.rt = rt
        # The handler's own part of each checkpoint (GC: its epoch); the
        # journal adds how many objects the walk visited.
        self.state = {} if state is None else state
        self.last_write = time.monotonic()
        self.slowest = 0.0  # the longest a journal write or a unit of the handler's took
        self.paused = False  # the walk stopped to hand the rest on

    def restore(self, root: str | None) -> Walk:
        """The walk as the journal left it, or a new one from `root` (none:
        the caller plans its roots)."""
        walk = Walk(journaled=True)
        with self.rt.connection() as conn:
            rows = conn.execute(RESTORE, {"job": self.ctx.job_id}).fetchall()
        if not rows:
            if root is not None:
                walk.plan(root, "tree")
            return walk
        walk.journaled = False  # what the journal holds is not news
        for digest, kind, status in rows:
            if status == "todo":
                walk.todo.append((digest, kind))
            else:
                walk.found(digest, kind, status)
        walk.journaled = True
        return walk

    def near_deadline(self) -> bool:
        """True once the claim should write and hand the rest on: less is
        left than the margin, or three times the slowest write or unit."""
        return self.ctx.remaining() < max(PAUSE_MARGIN_SECS, 3 * self.slowest)

    def took(self, secs: float) -> None:
        """A unit of the handler's own (a GC delete batch) took `secs`."""
        self.slowest = max(self.slowest, secs)

    def pause(self, walk: Walk) -> bool:
        """After each object: write when due; True (having written) once the
        claim should hand the rest on."""
        now = time.monotonic()
        if self.near_deadline():
            self.write(walk)
            self.paused = True
            return True
        if now - self.last_write >= WRITE_EVERY_SECS or len(walk.news) >= WRITE_EVERY_FINDINGS:
            self.write(walk)
        return False

    def write(self, walk: Walk) -> None:
        """Write the findings since the last write, then checkpoint the
        walk's progress; `LeaseLost` if the job is no longer this claim's."""
        began = time.monotonic()
        latest: dict[tuple[str, str], str] = {}
        for digest, kind, status in walk.news:
            latest[(digest, kind)] = status  # in order: a finding follows its todo
        walk.news = []
        if latest:
            keys = list(latest)
            with self.rt.connection() as conn:
                row = conn.execute(WRITE, {
                    "job": self.ctx.job_id, "token": self.ctx.claim_token,
                    "digests": [k[0] for k in keys], "types": [k[1] for k in keys],
                    "statuses": list(latest.values())}).fetchone()
            if row is None or not row[0]:
                raise LeaseLost(f"job {self.ctx.job_id} is no longer held by this claim")
        visited, total = len(walk.visited), len(walk.visited) + len(walk.todo)
        self.ctx.checkpoint({**self.state, "walk": visited},
                            progress=visited / total if total else None)
        self.last_write = time.monotonic()
        self.took(self.last_write - began)

    def forget(self, conn: Any) -> None:
        """The walk is done: its journal goes (with the verdict's transaction)."""
        conn.execute(FORGET, {"job": self.ctx.job_id})
