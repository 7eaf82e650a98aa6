"""Heartbeats and checkpoints (SPEC §6 step 3, §17, §26): a handler's own
fenced write, asked for on its slot thread and sent by the coordinator with
its next round trip.

The slot posts a `Heartbeat` on the outbox and waits; the coordinator queues
it in the flush (`queue`) and answers it once the round trip is back. The
engine's own renewals (leases.py) ride in the same statement.
"""

from __future__ import annotations

import time
from queue import SimpleQueue
from typing import Any

from tick.engine.context import JobContext, Saving
from tick.engine.flush import Flush
from tick.engine.leases import Leases
from tick.engine.slots import Heartbeat, Run
from tick.engine.spec import RunSpec

# Longest a handler's heartbeat or checkpoint waits for its round trip. The
# coordinator sends it with its next round trip, within MAX_WAIT_SECS when
# nothing else is due; a wait this long means the coordinator is held in a
# slow exchange or the run ended, so the handler hears that its lease is
# lost (LeaseLost, as when the claim lost its job) rather than hanging.
HEARTBEAT_WAIT_SECS = 30.0


class Heartbeats:
    """The handlers' side of the round trips: `request` on slot threads,
    `queue` on the coordinator's."""

    def __init__(self, spec: RunSpec, running: dict[int, Run], flush: Flush,
                 outbox: SimpleQueue[Any]) -> None:
        self._spec = spec
        self._running = running  # the coordinator's; read here, never written
        self._flush = flush
        self._outbox = outbox

    def request(self, ctx: JobContext, saving: Saving | None) -> float | None:
        """Called on a slot thread: post the request (a checkpoint if
        `saving`) and wait for its round trip; the new lease end, or None if
        the claim lost its job."""
        run = self._running.get(ctx.job_id)
        if run is None or run.ctx is not ctx:
            return None
        beat = Heartbeat(run, saving)
        self._outbox.put(beat)
        if not beat.done.wait(timeout=HEARTBEAT_WAIT_SECS):
            return None
        if beat.refused is not None:
            # Which argument is at fault is the server's to say: progress
            # and state are both checked before they are sent (SPEC §17).
            raise ValueError(f"checkpoint: the database refused it ({beat.refused})")
        return beat.deadline

    def queue(self, beat: Heartbeat) -> None:
        """Coordinator thread: send `beat` with the next round trip, or
        answer "lost" at once if its run is over."""
        run = beat.run
        if run.ctx.abandoned or run.row.id not in self._running:
            beat.done.set()
            return
        lease = (run.handler and run.handler.lease_secs) or self._spec.lease_secs
        if self._spec.deadline is not None:
            lease = min(lease, max(self._spec.deadline - time.monotonic(), 0.0))
        self._flush.heartbeat(beat, float(lease))

    def answer(self, beats: list[Heartbeat], sent: float, extended: dict[int, float],
               refused: dict[int, str], leases: Leases) -> None:
        """The round trip sent at `sent` is back: tell each waiting handler
        its new lease end (None: lost), and `leases` that it was extended."""
        for beat in beats:
            job_id = beat.run.row.id
            secs = extended.get(job_id)
            beat.deadline = None if secs is None else sent + secs
            if secs is not None:
                leases.extended(job_id, sent, secs)
            beat.refused = refused.get(job_id)
            if secs is not None and beat.saving is not None:
                beat.run.checkpointed = True  # durable before the handler hears so
            beat.done.set()
