"""Claims (SPEC §6 step 2): what the next claim may ask for, and when
claiming ends.

A claim asks for at most one job per free slot, never past `max_jobs`, with
leases that end by the tick's deadline. Claiming ends once for one reason,
kept in `ended`: `drained` (a claim came back short), `max_jobs`,
`deadline` (too little time left to run a job) or `stopped`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tick.engine.cursor import Cursor
from tick.history import NO_SEED
from tick.queue import NO_FAIR, ClaimedRow, ClaimRequest, FairAnswer
from tick.words import StopReason

if TYPE_CHECKING:
    from tick.engine.spec import RunSpec

# Claim nothing when less than this is left before the deadline: a lease that
# short cannot run a job, and the tick must return on time.
MIN_CLAIM_SECS = 1.0
# How soon to claim again when a global limit held ready jobs back (SPEC §18):
# room comes back as a limited job ends or a rate window slides.
HELD_BACK_RETRY_SECS = 0.2
# How soon a claim the server refused is sent again: a second, so that a
# full disk or a held lock costs one `claim_refused` warning a second.
REFUSED_RETRY_SECS = 1.0


class Claims:
    """The claim state of one run. Coordinator thread only."""

    def __init__(self, spec: RunSpec, slots: list[str], leases_json: str) -> None:
        self._spec = spec
        self._leases_json = leases_json  # kind -> its own lease, for the claim statement
        self.free = slots  # slot names without a job; the last ones are claimed first
        self.claimed = 0  # jobs claimed in this run (what max_jobs counts)
        self.ended: StopReason | None = None  # why claiming ended; None while it goes on
        # Continuous mode: the queue came back empty, so no claim before this
        # instant unless a wake-up (NOTIFY, stop) clears it. Also any run
        # whose last claim a global limit held back.
        self.idle_until = 0.0
        # The last claim left ready jobs to a limit's room, or came back
        # short with ready jobs left (the fair claim's `more`).
        self.held_back = False
        self.cursor = Cursor()  # where the next claim's walk starts (SPEC §24)
        self.fair = False  # the last claim was the fair claim (SPEC §23): the next skips the walk
        self.dense = False  # and its one-pass read held: the next is its short form
        # The last claim saw a kind or queue limit: the next sends step 2,
        # the lanes (SPEC §18); without one they cost a plan's set-up to
        # claim nothing (decision 0018, amended). A first claim goes without
        # them: on a new connection step 2's parse and plan took 22 ms, most
        # of an empty `awc tick`'s exchanges, and where a limit exists the
        # claim takes nothing and the next, at once, sends them.
        self.lanes = False
        self.lanes_only = False  # and they were the last claim: send steps 1 and 2 alone
        # The least left for a claim: a second, or half of what the run had
        # at its first claim (`--max-secs 1` counts from the process's start,
        # and a floor of a second left a run of 1 s no claim at all).
        self.floor: float | None = None

    def seeded(self, seed: Sequence[Any] | None, key_seed: str | None = None,
               ready: bool = True) -> None:
        """Start from the cursor the last run left (SPEC §24, cursor.py),
        unless this run's claims are filtered: such a cursor is exact only
        for the claimer's own kinds and queues. The rotation across keys
        goes on from the last run's key cursor, filtered or not (SPEC §23):
        any key is a place to start it. A one-shot run whose maintenance
        pass found no job `ready` is drained before it claims: its claim's
        statements were most of an empty tick's exchanges (decision 0040)."""
        if not (ready or self._spec.continuous):
            self.ended = "drained"
        self.cursor.seed_key(key_seed)
        if self._spec.kinds is None and self._spec.queues is None:
            self.cursor.seed(seed, time.monotonic())

    def left(self, now: float) -> dict[str, Any]:
        """The cursor for the run's history row to leave to the next
        process; from a filtered claimer, the key cursor alone (any key is
        a place to start the rotation; a filtered run left none, and every
        `awc tick --kind` began at the first key)."""
        left = self.cursor.left(now)
        if self._spec.kinds is None and self._spec.queues is None:
            return left
        return {**NO_SEED, "key_after": left["key_after"]}

    def request(self, now: float, riding: bool = False) -> ClaimRequest | None:
        """The claim to send now, or None (nothing free, idle, or ended).
        A run whose queue drained still claims with each flush of outcomes
        (`riding`): an outcome may make a waiting child ready in the same
        transaction (SPEC §20), and the claim beside it takes the child."""
        spec = self._spec
        ended = None if self.ended == "drained" and riding else self.ended
        if ended is not None or not self.free or now < self.idle_until:
            return None
        left = math.inf if spec.deadline is None else spec.deadline - now
        if self.floor is None:
            self.floor = min(MIN_CLAIM_SECS, max(left, 0.0) / 2)
        if left < self.floor:
            self.ended = "deadline"
            return None
        want = len(self.free)
        if spec.max_jobs is not None:
            want = min(want, spec.max_jobs - self.claimed)
            if want <= 0:
                self.ended = "max_jobs"
                return None
        return ClaimRequest(
            slots=self.free[-want:],
            lease_secs=float(spec.lease_secs),
            cap_secs=float(spec.lease_secs) if math.isinf(left) else left,
            leases_json=self._leases_json,
            kinds=spec.kinds,
            queues=spec.queues,
            cursor=self.cursor.params(now),
            read_timeouts=spec.renew_leases,
            fair=self.fair,
            dense=self.dense,
            lanes=self.lanes,
            lanes_only=self.lanes_only,
        )

    def took(self, request: ClaimRequest, rows: list[ClaimedRow],
             held_back: bool = False, mark: str | None = None,
             fair: FairAnswer = NO_FAIR, refused: bool = False, lanes: bool = False) -> None:
        """A claim came back with `rows`: their slots are taken; fewer rows
        than asked for means the queue has no more ready jobs (for this
        claimer, now), unless a global limit held some back: then the run
        claims again shortly, until its deadline (SPEC §18); or the fair
        claim or its gate said ready jobs are left (`fair.more`, SPEC §23):
        then it claims again at once (`fair.again`) or shortly. A claim the
        server `refused` (a cancel, a lock, no room: decision 0036) says
        nothing of the queue: claimed again shortly, as if held back (taken
        for a short claim, it ended a tick `drained` with thousands ready)."""
        if refused:
            self.ended = None if self.ended == "drained" else self.ended
            self.held_back = True
            self.idle_until = time.monotonic() + REFUSED_RETRY_SECS
            return
        self.cursor.moved(mark, time.monotonic())
        self.fair, self.dense, self.cursor.key_pass = fair.next, fair.dense, fair.spread
        # A kind or queue limit appeared with step 2 not sent: the claim took
        # nothing (its walk yields to the lanes); or step 2 was sent alone and
        # no limit binds any more (the walk would claim): claim again at once.
        missed = (lanes and not request.lanes) or (request.lanes_only and not fair.by_lanes)
        self.lanes, self.lanes_only = lanes, fair.by_lanes  # by_lanes: step 1 saw a limit
        if fair.key is not None:
            self.cursor.served_key(fair.key)
        if self.ended == "drained":
            self.ended = None  # a claim rode a flush: drained again only if it is short
        taken = {row.slot for row in rows}
        self.free = [name for name in self.free if name not in taken]
        self.claimed += len(rows)
        short = len(rows) < len(request.slots)
        self.held_back = (held_back or fair.more or missed) and short
        if self.held_back:
            now = (fair.again or missed) and not held_back
            self.idle_until = time.monotonic() + (0.0 if now else min(
                HELD_BACK_RETRY_SECS, self._spec.poll_interval_s))
        elif short:
            if self._spec.continuous:
                self.idle_until = time.monotonic() + self._spec.poll_interval_s
            else:
                self.ended = "drained"

    def release(self, slot: str) -> None:
        """A job left `slot` (recorded or abandoned): it may be claimed for again."""
        self.free.append(slot)

    def wake(self) -> None:
        """Look for work at the next turn (a NOTIFY, or a stop)."""
        self.idle_until = 0.0

    def stop(self) -> None:
        """The process is stopping: claim nothing more."""
        self.ended = "stopped"

    def may_claim_later(self) -> bool:
        """True while an idle run should wait for work rather than end."""
        return self.ended is None and (self._spec.continuous or self.held_back)

    def idle(self, now: float) -> bool:
        """True while a continuous run waits for work after a short claim."""
        return self.ended is None and now < self.idle_until

    def stop_reason(self, deadline_cuts: int) -> StopReason:
        """The report's `stop_reason` (SPEC §6): a job cut at its deadline
        makes it `deadline` unless the run was stopped."""
        if self.ended == "stopped":
            return "stopped"
        if deadline_cuts or self.ended == "deadline":
            return "deadline"
        return self.ended or "drained"
