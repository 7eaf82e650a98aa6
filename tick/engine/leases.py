"""Leases the engine renews (SPEC §26, docs/decisions/0031).

A job's lease is how soon a dead worker's job comes back; its timeout is how
long it may run. A job whose timeout reaches past its lease (its handler or
its producer declared one) has its lease renewed here, by the coordinator,
so its handler need not call `heartbeat()`:

- A lease is renewed at the latest once it is **half spent**: when one falls
  due, the coordinator makes a round trip for it if none is going anyway.
  A round trip that goes anyway (outcomes, a claim, a fence check) carries
  every lease at least a **quarter** spent, so renewals batch, cost no round
  trip of their own in a busy loop, and leave a failing renewal time to be
  retried before its lease is half spent.
- All renewals of a round trip are one fenced statement (`extend_leases.sql`,
  arrays of ids, tokens and lengths). One that matches no row lost its job
  (cancelled, rescued, re-claimed): its run is cancelled at once (LeaseLost).
- A renewal that fails for another reason (a lost connection, a refused
  statement) is retried with the next round trip. A lease whose renewals
  kept failing until it was half spent (wall-clock time since the last
  success, `time.monotonic()`) cancels its run, well before the lease could
  lapse: no two workers run one job in good faith.

Jobs whose timeout is their lease (no timeout declared) are not tracked: as
before SPEC §26, the lease is their deadline and `heartbeat()` pushes both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tick.engine.outcomes import error_text

if TYPE_CHECKING:
    import psycopg

    from tick.engine.slots import Run
    from tick.engine.spec import RunSpec
    from tick.events import EventSink

# A lease falls due for renewal once this share of it is spent.
RENEW_AT = 0.5
# A round trip that goes anyway renews every lease this far spent.
RIPE_AT = 0.25
# A lease renewed last this share of it ago, while renewals fail, cancels its run.
GIVE_UP_AT = 0.5
# How soon a renewal that failed is sent again (with a round trip that goes
# anyway, or one of its own).
RETRY_SECS = 0.25
# An exchange with the server answers before any renewed lease is this far
# spent, or the connection is given up on: a database silent on an open
# socket fails the renewals then, not after the watchdog's minute.
ANSWER_BY_AT = 0.75
# How often the claims of long-running jobs are checked for an operator cancel.
FENCE_CHECK_SECS = 2.0
# What a run cancelled for its lease is recorded as (SPEC §26: `Retry("lease lost")`).
LEASE_LOST_ERROR = error_text("LeaseLost", "lease lost: its renewals failed for half the lease")


@dataclass(slots=True)
class Lease:
    """One running job's lease, as this worker last renewed it."""

    run: Run
    renewed: float  # time.monotonic() when its last successful renewal (or claim) was sent
    ends: float  # when it ends, at the latest (renewed + what the database granted)
    length: float  # what a renewal asks for: the handler's lease, or the run's

    def share(self, now: float) -> float:
        """How much of the lease is spent at `now` (0 to 1 and beyond)."""
        granted = self.ends - self.renewed
        return (now - self.renewed) / granted if granted > 0 else math.inf

    def at(self, share: float) -> float:
        """The instant `share` of the lease is spent."""
        return self.renewed + (self.ends - self.renewed) * share

    def needed(self) -> bool:
        """True while the lease would lapse before the run must end (its
        deadline only moves earlier: a stop, a cancel); a run abandoned or
        fenced out needs nothing more."""
        ctx = self.run.ctx
        return self.ends < ctx.monotonic_deadline and not (ctx.abandoned or ctx.lost)


class Leases:
    """The renewed leases of one run of the engine. Coordinator thread only."""

    def __init__(self, spec: RunSpec, *, enabled: bool = True) -> None:
        self._spec = spec
        self._enabled = enabled
        self._leases: dict[int, Lease] = {}
        # Cached earliest instants, so a busy loop looks at no lease per turn:
        # nothing is ripe before `_next_ripe`, nothing due before `next_due`.
        self._next_ripe = math.inf
        self.next_due = math.inf
        # Since when renewals have been failing (None: they are not); the
        # loop claims nothing meanwhile and /readyz says why (SPEC §26).
        self.failing_since: float | None = None
        self._all = False  # renew_all() was asked for

    def __len__(self) -> int:
        return len(self._leases)

    def track(self, run: Run, sent: float, length: float) -> None:
        """A job was claimed (its round trip sent at `sent`): renew its lease
        if its deadline reaches past it."""
        lease = Lease(run, sent, sent + run.row.lease_s, float(length))
        if not self._enabled or not lease.needed():
            return
        self._leases[run.row.id] = lease
        self._next_ripe = min(self._next_ripe, lease.at(RIPE_AT))
        self.next_due = min(self.next_due, lease.at(RENEW_AT))

    def renew_all(self) -> None:
        """Renew every lease with the next round trip, however little spent
        (after an outage: it may have cost some runs their job)."""
        self._all = True
        self._next_ripe = self.next_due = -math.inf

    def forget(self, job_id: int) -> None:
        """The job left the run (recorded, abandoned)."""
        self._leases.pop(job_id, None)
        if not self._leases:
            self.failing_since = None  # nothing left to renew (SPEC §26)

    def pick(self, now: float, going: bool) -> list[tuple[int, str, float]]:
        """The renewals to send now, as (id, token, lease secs): every lease
        at least a quarter spent if a round trip is going anyway (`going`) or
        one lease is half spent; else none."""
        if now < self._next_ripe or (not going and now < self.next_due):
            return []
        picked: list[tuple[int, str, float]] = []
        ripe = due = math.inf
        for job_id, lease in list(self._leases.items()):
            if not lease.needed():
                del self._leases[job_id]
                continue
            if self._all or lease.share(now) >= RIPE_AT:
                secs = self._length(lease, now)
                if secs > 0:
                    picked.append((job_id, lease.run.row.token, secs))
                    continue
            ripe, due = min(ripe, lease.at(RIPE_AT)), min(due, lease.at(RENEW_AT))
        # Until the round trip answers, the picked ones count as not ripe:
        # `answered()` or `failed()` sets the next instants.
        self._next_ripe, self.next_due, self._all = ripe, due, False
        if not self._leases:
            self.failing_since = None
        return picked

    def _length(self, lease: Lease, now: float) -> float:
        # Within a tick a lease never ends past the tick's deadline (SPEC §6).
        if self._spec.deadline is None:
            return lease.length
        return min(lease.length, max(self._spec.deadline - now, 0.0))

    def answered(self, sent: float, asked: list[tuple[int, str, float]],
                 granted: dict[int, float], refused: dict[int, str],
                 events: EventSink | None = None) -> list[Run]:
        """A round trip sent at `sent` came back: the leases it renewed
        (`granted`: id -> secs) start again; those the server refused
        (`refused`, a statement error) are retried; the runs of those that
        matched no row (the fence) lost their job: each is cancelled at once
        (`mark_lost`, logged to `events`) and returned."""
        failed = [a for a in asked if a[0] in refused]
        if failed:
            self.failed(sent, failed)
        lost: list[Run] = []
        for job_id, _, _ in asked:
            if job_id in refused:
                continue
            lease = self._leases.get(job_id)
            if lease is None:
                continue
            secs = granted.get(job_id)
            if secs is None:
                lost.append(lease.run)
                del self._leases[job_id]
                continue
            self.extended(job_id, sent, secs)
        if asked and not failed:
            self.failing_since = None
        for run in lost:
            run.ctx.mark_lost()
            if events is not None:
                events.log("warning", "lease_lost", job_id=run.row.id, kind=run.row.kind)
        return lost

    def extended(self, job_id: int, sent: float, secs: float) -> None:
        """The lease of `job_id` was extended to `sent + secs` (by the
        engine, or by its handler's heartbeat or checkpoint)."""
        lease = self._leases.get(job_id)
        if lease is None:
            return
        lease.renewed, lease.ends = sent, sent + secs
        self._next_ripe = min(self._next_ripe, lease.at(RIPE_AT))
        self.next_due = min(self.next_due, lease.at(RENEW_AT))

    def failed(self, now: float, asked: list[tuple[int, str, float]] | None = None) -> None:
        """A round trip (carrying `asked` renewals, or any round trip while
        leases are held) failed for a reason other than the fence: retried
        at the next turn."""
        if not self._leases:
            return
        if self.failing_since is None:
            self.failing_since = now
        for job_id, _, _ in asked or ():
            lease = self._leases.get(job_id)
            if lease is not None:  # due again soon: a later round trip retries it
                self._next_ripe = self.next_due = min(self.next_due, now + RETRY_SECS)

    def given_up(self, now: float) -> list[Run]:
        """While renewals fail, the runs whose leases went unrenewed for half
        their length: they cancel themselves (SPEC §26)."""
        if self.failing_since is None:
            return []
        out = []
        for job_id, lease in list(self._leases.items()):
            if not lease.needed():
                del self._leases[job_id]
            elif lease.share(now) >= GIVE_UP_AT:
                del self._leases[job_id]
                out.append(lease.run)
        return out

    def answer_by(self) -> float | None:
        """The instant an exchange must answer by while leases are renewed
        (None: none is): the earliest lease three quarters spent. Past it,
        the connection is closed as silent, the renewals count as failed,
        and the runs past half their lease cancel themselves, before the
        lease could lapse and another worker rescue the job; waiting on the
        socket, they ran on past their lease while another worker ran the
        job too."""
        if not self._leases:
            return None
        return min(lease.at(ANSWER_BY_AT) for lease in self._leases.values())

    def next_give_up(self) -> float:
        """When `given_up` would next return a run, while renewals fail."""
        if self.failing_since is None:
            return math.inf
        return min((lease.at(GIVE_UP_AT) for lease in self._leases.values()), default=math.inf)

    def trouble(self, now: float) -> str | None:
        """Why the loop is not ready, for /readyz (SPEC §26), or None."""
        if self.failing_since is None or not self._leases:
            return None
        return (f"lease renewals failing for {now - self.failing_since:.0f} s "
                f"({len(self._leases)} running jobs; claiming paused)")


def fence_check(conn: psycopg.Connection[Any], running: dict[int, Run], now_perf: float) -> None:
    """Mark lost (`JobContext.mark_lost`) the runs among `running` older than
    `FENCE_CHECK_SECS` whose claim no longer holds the job (an operator
    cancelled it, or it was rescued): one read of their claims, cheaper than
    renewing them. A failure is the run's to recover (`DatabaseError`)."""
    from tick.db import as_database_error
    from tick.queue import lost_claims

    old = [(job_id, run.row.token) for job_id, run in running.items()
           if run.started and now_perf - run.started >= FENCE_CHECK_SECS]
    if not old:
        return
    try:
        lost = lost_claims(conn, old)
    except Exception as error:
        raise as_database_error(error, "checking claims", conn) from None
    for job_id in lost:
        if job_id in running:
            running[job_id].ctx.mark_lost()
