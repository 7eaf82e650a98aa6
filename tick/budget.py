"""A step's time (SPEC §6): its own budget, cut short by the tick's deadline."""

from __future__ import annotations

import time


class Budget:
    """How long a maintenance step may go on: its own budget, cut short by
    the tick's deadline (SPEC §6: every phase of a tick respects it). A unit
    of work (a schedule's transaction, a batch) starts only if one as long as
    the longest so far would end in time, so a step overshoots by nothing it
    could have foreseen."""

    def __init__(self, secs: float, deadline: float | None = None) -> None:
        now = time.monotonic()
        self.until = now + secs if deadline is None else min(now + secs, deadline)
        self.longest = 0.0
        self._began = now

    def room(self) -> bool:
        """Whether another unit fits; starts timing it."""
        self._began = time.monotonic()
        return self._began + self.longest < self.until

    def spent(self) -> None:
        """The unit `room` timed has ended."""
        self.longest = max(self.longest, time.monotonic() - self._began)
