"""`JobContext`: what a running handler knows and may do (SPEC §6, §6.1)."""

from __future__ import annotations

import json
import math
import numbers
import struct
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tick.engine.outcomes import CHECKPOINT_LIMIT
from tick.text import json_value_text

if TYPE_CHECKING:
    import psycopg

    from tick.waiting import ParentJob


# What a checkpoint asks the coordinator to save: (state JSON, progress).
Saving = tuple[str, float | None]
_UNREAD = object()


def progress_value(progress: Any) -> float:
    """`progress` as the `real` column `awc.jobs.progress` holds it (SPEC
    §17), or `ValueError` naming `progress`. Any real number in [0, 1] is
    accepted (an int, a float, a Fraction, a Decimal, a numpy float); it is
    rounded here to single precision, as the column would store it, because
    PostgreSQL refuses a double that rounds to 0 (1e-50: "underflow") and
    the refusal would reach the handler as if its state were at fault."""
    refused = ValueError("checkpoint: progress must be a number in [0, 1], or None")
    if isinstance(progress, bool) or not isinstance(progress, numbers.Real | Decimal):
        raise refused
    try:
        value = float(progress)
    except (OverflowError, ValueError, TypeError):
        raise refused from None
    if not 0.0 <= value <= 1.0:  # NaN fails this too
        raise refused
    single: float = struct.unpack("f", struct.pack("f", value))[0]
    return single


class JobCancelled(Exception):
    """Raised by `JobContext.check()` once the job should stop."""


class LeaseLost(JobCancelled):
    """The job is no longer this worker's: its lease was lost, it was cancelled,
    or it was abandoned at its deadline. Nothing it writes will be recorded."""


class JobContext:
    """The running job's view of itself.

    `deadline` is when the job must be done (its lease end, never past the
    tick's deadline; during a stop, never past the end of the stop grace);
    `heartbeat()` extends the lease by a fenced write; `cancelled` turns true
    at the deadline, on operator cancel, and at once when the process is
    asked to stop. Cooperative handlers call `check()` between units of work.

    `checkpoint(state, progress)` saves where the handler is (SPEC §17) with
    the same fenced write, and `saved` is what an earlier claim saved, so a
    job longer than a tick resumes instead of starting over.

    A stop is not a cancel (SPEC §6.1, §7.1): `stopping` says which it is. A
    handler that lets `JobCancelled` propagate during a stop hands its job
    back at once (released, attempt refunded); one that would rather finish
    within the grace calls `check(finish_on_stop=True)`, which raises only at
    the deadline, on cancel or on a lost lease.
    """

    __slots__ = (
        "_abandoned",
        "_cancelled",
        "_deadline",
        "_dsn",
        "_event",
        "_extend",
        "_fixed",
        "_grace_end",
        "_lost",
        "_saved",
        "_saved_text",
        "_stopping",
        "attempts",
        "claim_token",
        "job_id",
        "kind",
        "max_attempts",
    )

    def __init__(
        self,
        job_id: int,
        kind: str,
        attempts: int,
        max_attempts: int,
        deadline: float,
        extend: Callable[[JobContext, Saving | None], float | None],
        claim_token: str = "",
        saved: str | None = None,
        dsn: Callable[[], str] | None = None,
        fixed: bool = False,
    ) -> None:
        self.job_id = job_id
        self._dsn = dsn  # where ctx.parents() reads, without a connection of its own
        # This claim's fencing token: a handler that records its own holder
        # (a GC epoch) names the claim with it.
        self.claim_token = claim_token
        self.kind = kind
        self.attempts = attempts
        self.max_attempts = max_attempts
        self._deadline = deadline  # time.monotonic() instant
        # A declared timeout (SPEC §26) is not pushed back by a heartbeat or
        # checkpoint; without one, the deadline is the lease end and is.
        self._fixed = fixed
        self._extend = extend
        # A plain flag, plus an Event made only if a handler waits on it: a
        # busy engine creates tens of thousands of contexts a second.
        self._cancelled = False
        self._event: threading.Event | None = None
        self._stopping = False
        self._grace_end = math.inf
        self._lost = False
        self._abandoned = False
        self._saved_text = saved  # JSON text, decoded on first read of `saved`
        self._saved: Any = _UNREAD

    @property
    def deadline(self) -> datetime:
        """The instant the job must be done by (UTC)."""
        left = self._deadline - time.monotonic()
        return datetime.now(UTC) + timedelta(seconds=left)

    def remaining(self) -> float:
        """Seconds left before the deadline (negative once past)."""
        return self._deadline - time.monotonic()

    @property
    def cancelled(self) -> bool:
        """True once the job should stop: deadline, cancel, lost lease or shutdown."""
        return self._cancelled or time.monotonic() >= self._deadline

    def check(self, *, finish_on_stop: bool = False) -> None:
        """Raise `JobCancelled` (or `LeaseLost`) once `cancelled` is true.

        With `finish_on_stop`, a process stop alone does not raise: the
        handler keeps going until its deadline, which a stop moves to the end
        of the grace, so it can finish what it started.
        """
        if self._lost or self._abandoned:
            raise LeaseLost(f"job {self.job_id} is no longer held by this worker")
        if time.monotonic() >= self._deadline:
            raise JobCancelled(f"job {self.job_id} reached its deadline")
        if self._cancelled and not (finish_on_stop and self._stopping):
            reason = "the process is stopping" if self._stopping else "it was cancelled"
            raise JobCancelled(f"job {self.job_id} was asked to stop: {reason}")

    def heartbeat(self) -> datetime:
        """Extend the lease now by a fenced write and return when it ends;
        raise `LeaseLost` if it is gone. Without a declared timeout this also
        pushes the deadline back by one lease (SPEC §26); a job with one need
        not call it: the engine renews its lease as it runs."""
        ends = self._write(None)
        return datetime.now(UTC) + timedelta(seconds=ends - time.monotonic())

    def checkpoint(self, state: Any, progress: float | None = None) -> None:
        """Save `state` (any JSON value) and `progress` (in [0, 1], or None to
        keep the last) on the job, durably once this returns, and extend the
        lease as `heartbeat()` does (SPEC §17). A later claim reads the state
        as `saved`; a job cut at its deadline after a checkpoint continues
        from it instead of spending an attempt. Raises `LeaseLost` if the job
        is no longer this claim's (nothing is saved), `ValueError` for a
        state or progress that cannot be saved."""
        saved_progress = None if progress is None else progress_value(progress)
        text, problem = json_value_text(state)
        if text is None:
            raise ValueError(f"checkpoint: the state {problem}")
        if len(text) > CHECKPOINT_LIMIT:
            raise ValueError(f"checkpoint: the state is {len(text)} characters of JSON; "
                             f"at most {CHECKPOINT_LIMIT} may be saved")
        self._write((text, saved_progress))

    @property
    def saved(self) -> Any:
        """The state the last checkpoint of an earlier claim saved (SPEC §17):
        None on the job's first run, or when nothing was saved."""
        if self._saved is _UNREAD:
            self._saved = None if self._saved_text is None else json.loads(self._saved_text)
        return self._saved

    def parents(self, conn: psycopg.Connection[Any] | None = None) -> Iterator[ParentJob]:
        """This job's parents, `(id, kind, state, result)` each, in id order,
        read from the database in pages of at most 1,000 (SPEC §20). Reads
        through `conn` if given, else on a connection of its own opened for
        the iteration."""
        from tick.waiting import parents

        if conn is not None:
            yield from parents(conn, self.job_id)
            return
        if self._dsn is None:
            raise RuntimeError("ctx.parents(): this context has no database; pass a connection")
        import psycopg

        with psycopg.connect(self._dsn(), autocommit=True) as own:
            yield from parents(own, self.job_id)

    def _write(self, saving: Saving | None) -> float:
        if self._lost or self._abandoned:
            raise LeaseLost(f"job {self.job_id} is no longer held by this worker")
        lease_end = self._extend(self, saving)
        if lease_end is None:
            self.mark_lost()
            raise LeaseLost(f"job {self.job_id} lost its lease or was cancelled")
        if not self._fixed:
            # A longer lease never lengthens a stop's grace.
            self._deadline = min(lease_end, self._grace_end)
        return lease_end

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`, waking early when cancelled; True if cancelled."""
        event = self._event
        if event is None:
            event = self._event = threading.Event()
        if self._cancelled:  # set before the event existed
            return True
        limit = min(seconds, max(self.remaining(), 0.0))
        return event.wait(limit) or self.cancelled

    # The engine's side -------------------------------------------------------

    def cancel(self, *, stopping: bool = False, grace_end: float | None = None) -> None:
        """Ask the handler to stop (engine use); a stop's grace ends at
        `grace_end` (a `time.monotonic()` instant), which bounds the deadline."""
        if stopping:
            self._stopping = True
        if grace_end is not None:
            self._grace_end = grace_end
            self._deadline = min(self._deadline, grace_end)
        self._set_cancelled()

    def mark_lost(self) -> None:
        """The claim no longer holds the job (engine use)."""
        self._lost = True
        self._set_cancelled()

    def abandon(self) -> None:
        """The engine gave up on the handler; its later writes are refused."""
        self._abandoned = True
        self._set_cancelled()

    def _set_cancelled(self) -> None:
        # Flag first, then the event: a waiter that made its event after this
        # read sees the flag (see wait()).
        self._cancelled = True
        event = self._event
        if event is not None:
            event.set()

    @property
    def abandoned(self) -> bool:
        """True once the engine recorded this job's outcome without its handler."""
        return self._abandoned

    @property
    def lost(self) -> bool:
        """True once the claim was found to no longer hold the job."""
        return self._lost

    @property
    def stopping(self) -> bool:
        """True when cancellation came from a process stop."""
        return self._stopping

    @property
    def monotonic_deadline(self) -> float:
        """The deadline as a `time.monotonic()` instant (engine use)."""
        return self._deadline
