"""Deadlines, stop, fences and leases given up: the part of the coordinator
(coordinator.py, its subclass) that ends runs of jobs before their handler
returns. Coordinator thread only.

Deadlines are the coordinator's, not the handler's: a job still running at
its deadline is recorded as a fenced `Retry("deadline exceeded")` and its
handler abandoned (Python cannot kill a thread); the context refuses its
later writes and its slot gets a fresh thread. See docs/decisions/0002.
"""

from __future__ import annotations

import math
import time

import tick.engine.spans as spans
from tick.engine.claims import Claims
from tick.engine.flush import Flush
from tick.engine.leases import FENCE_CHECK_SECS, LEASE_LOST_ERROR, Leases, fence_check
from tick.engine.parts import EngineParts
from tick.engine.slots import Run, cut_at_deadline, handler_stack
from tick.engine.spec import RunSpec
from tick.errors import DatabaseError
from tick.words import Record


class Ending:
    """The coordinator's fields these use, and the methods."""

    engine: EngineParts
    spec: RunSpec
    claims: Claims
    flush: Flush
    leases: Leases
    running: dict[int, Run]
    stopping_since: float | None
    deadline_cuts: int
    next_expiry: float
    next_fence_check: float
    trace: spans.RunTrace | None

    # -- deadlines, stop, fences, leases ---------------------------------------

    def _expire(self, now: float) -> None:
        grace_over = (self.stopping_since is not None
                      and now >= self.stopping_since + self.spec.stop_grace_secs)
        soonest = math.inf
        for run in list(self.running.values()):
            if grace_over:  # handed back; with its checkpoint, as a Continue (SPEC §17)
                self._abandon(run, Record.CONTINUE if run.checkpointed else Record.RELEASE,
                              None, 0.0, None)
            elif run.ctx.monotonic_deadline <= now:
                self._abandon(run, *cut_at_deadline(run, handler_stack(run)))
                if self.spec.deadline is not None:
                    self.deadline_cuts += 1
            else:
                soonest = min(soonest, run.ctx.monotonic_deadline)
        self.next_expiry = soonest

    def _abandon(self, run: Run, record: Record, detail: str | None, delay: float,
                 where: str | None) -> None:
        run.ctx.abandon()
        del self.running[run.row.id]
        self.leases.forget(run.row.id)
        self.engine.pool.abandon(run)
        self.claims.release(run.row.slot)
        self.flush.record(run, record, detail, delay, where)

    def _abandon_all(self, error: DatabaseError) -> None:
        for run in list(self.running.values()):
            run.ctx.abandon()
            self.engine.pool.abandon(run)
            spans.abandoned(run.span)
        self.running.clear()
        self.trace = spans.finish(self.trace, None, error)
        self.flush.release_heartbeats()

    def _begin_stop(self, now: float) -> None:
        self.stopping_since = now
        self.claims.stop()
        grace_end = now + self.spec.stop_grace_secs
        for run in self.running.values():
            run.ctx.cancel(stopping=True, grace_end=grace_end)

    def _check_fences(self, now: float) -> None:
        self.next_fence_check = now + FENCE_CHECK_SECS
        fence_check(self.engine.conn, self.running, time.perf_counter())

    def _give_up(self, now: float) -> None:
        """Cancel the runs whose leases went unrenewed for half their length
        while renewals failed: recorded as a Retry if the database answers
        again in time, else left to rescue (SPEC §26)."""
        for run in self.leases.given_up(now):
            if run.row.id in self.running:
                self.engine.events.log("warning", "lease_given_up", job_id=run.row.id,
                                       kind=run.row.kind)
                self._abandon(run, Record.RETRY, LEASE_LOST_ERROR,
                              run.jitter.delay(run.row.attempts - 1), None)
