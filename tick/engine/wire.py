"""Round trips that overlap (docs/decisions/0037): while one exchange runs on
the server, the coordinator dispatches and gathers the jobs of another.

A drain's round trips go out on two lanes, each a connection and a thread
of its own: the engine's connection and a second one the engine opens when
a drain first needs it. Each exchange is still one transaction and one
round trip (decision 0003): what it records, the claim beside it. A lane's
thread only sends the exchange and reads its answer; everything else stays
the coordinator's: it builds the batch, settles what came back (on the
lane's connection, idle until then) and hands the claimed jobs to slots.

Only plain exchanges overlap: outcomes and a claim for at most half the
slots. Anything else (a heartbeat, a checkpoint, a lease renewal, the
history row's opening or closing, a fence check) waits until nothing is in
flight and goes inline, on the coordinator's thread, as before: that keeps
a job's renewal and its outcome from racing on two connections, and the
history row's tail in the same transaction as the claim it reads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any

from tick.engine.flush import Flush, send
from tick.events import EventSink
from tick.queue import ClaimRequest, RoundTrip

if TYPE_CHECKING:
    import psycopg

# Round trips overlap only in runs with at least this many slots: each claim
# then asks for half of them at most, so two claims fill every slot.
OVERLAP_MIN_SLOTS = 64
# ... and only after a claim came back full with at least this many jobs:
# an empty or short queue never opens the second connection.
BACKLOG_MIN_JOBS = 32


@dataclass(eq=False, slots=True)
class Exchange:
    """One round trip handed to a lane, and what came back."""

    lane: Lane
    batch: Flush
    claim: ClaimRequest | None
    sent: float
    conn: Any = None  # the connection it went on (the lane's thread sets it)
    result: RoundTrip | None = None
    error: Exception | None = None


@dataclass(eq=False)
class Lane:
    """A connection and the thread that runs its exchanges, one at a time.
    `busy` is the coordinator's: set when it hands the lane an exchange,
    cleared once it has settled the answer."""

    connection: Callable[[], psycopg.Connection[Any]]
    outbox: SimpleQueue[Any]  # the engine's: answers go back with the slots' outcomes
    events: EventSink
    name: str
    busy: bool = False
    _work: SimpleQueue[Exchange | None] = field(default_factory=SimpleQueue)
    _thread: threading.Thread | None = None

    def submit(self, exchange: Exchange) -> None:
        self.busy = True
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
            self._thread.start()
        self._work.put(exchange)

    def stop(self) -> None:
        if self._thread is not None:
            self._work.put(None)
            self._thread = None

    def _serve(self) -> None:
        while True:
            exchange = self._work.get()
            if exchange is None:
                return
            try:
                exchange.conn = conn = self.connection()
                exchange.result = send(conn, exchange.batch, exchange.claim, self.events)
            except Exception as error:  # the coordinator raises it (SPEC §4.2)
                exchange.error = error
            self.outbox.put(exchange)


class Wire:
    """The lanes of one run and the rule for when round trips overlap.
    Coordinator thread only."""

    def __init__(self, lanes: list[Lane] | None, concurrency: int) -> None:
        self.lanes = lanes if lanes and concurrency >= OVERLAP_MIN_SLOTS else []
        # The most a claim asks for: half the slots, when round trips may overlap.
        self.most = -(-concurrency // 2) if self.lanes else None
        self.backlog = False  # the last claim came back full: a drain is under way
        self.in_flight = 0

    def took(self, claim: ClaimRequest, claimed: int) -> None:
        """A claim was answered: overlap while claims come back full."""
        self.backlog = (bool(self.lanes) and claimed == len(claim.slots)
                        and claimed >= BACKLOG_MIN_JOBS)

    def free(self) -> Lane | None:
        """A lane for a plain exchange now, or None (go inline instead)."""
        if not self.backlog:
            return None
        return next((lane for lane in self.lanes if not lane.busy), None)

    def full(self) -> bool:
        """Every lane is busy: nothing more can go out until one answers."""
        return bool(self.lanes) and self.in_flight >= len(self.lanes)

    def submit(self, lane: Lane, exchange: Exchange) -> None:
        self.in_flight += 1
        lane.submit(exchange)

    def landed(self, exchange: Exchange) -> None:
        self.in_flight -= 1
        exchange.lane.busy = False


def plain(batch: Flush) -> bool:
    """Outcomes only: no heartbeat, checkpoint or renewal rides this batch."""
    writes = batch.writes
    return not (writes.renewals or writes.lease_extensions or writes.checkpoint
                or batch.heartbeats)
