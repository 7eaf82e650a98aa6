"""The supervisor (SPEC §7.2): keeps the loop's background parts running.

Each part (tick runner, listener, maintenance, metrics server) runs on its
own thread under a unique name. A part that raises, or returns while the
process is not stopping, is restarted after an exponential backoff with
jitter. Its restart budget (5) is spent within one unhealthy streak and
refilled once the part has stayed up for a healthy minute; a part that
exhausts it is marked dead, and `/readyz` answers 503 naming it. A crash is
logged with its traceback and never takes the process down.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

from tick.engine.backoff import Jitter, reconnect_delay
from tick.events import EventSink, NullEvents

Part = Callable[[threading.Event], None]

RESTART_BUDGET = 5
HEALTHY_SECS = 60.0
BASE_DELAY_SECS = 0.5
MAX_DELAY_SECS = 30.0


@dataclass
class PartState:
    """What the supervisor knows of one part; read by /healthz and /readyz."""

    name: str
    status: str = "starting"  # running | restarting | dead | stopped
    restarts: int = 0  # restarts in the current unhealthy streak
    total_restarts: int = 0
    last_error: str | None = None
    delays: list[float] = field(default_factory=list)


class Supervisor:
    """Runs named parts until `stop`, restarting the ones that fail."""

    def __init__(
        self,
        stop: threading.Event,
        *,
        events: EventSink | None = None,
        budget: int = RESTART_BUDGET,
        healthy_secs: float = HEALTHY_SECS,
        base_delay: float = BASE_DELAY_SECS,
        max_delay: float = MAX_DELAY_SECS,
    ) -> None:
        self.stop = stop
        self.events = events or NullEvents()
        self.budget = budget
        self.healthy_secs = healthy_secs
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.parts: dict[str, PartState] = {}
        self._threads: dict[str, threading.Thread] = {}
        self._jitter = Jitter("awc-supervisor")

    def add(self, name: str, part: Part) -> None:
        """Start `part` under `name` (unique)."""
        if name in self.parts:
            raise ValueError(f"a part named {name!r} is already supervised")
        state = PartState(name)
        self.parts[name] = state
        thread = threading.Thread(target=self._keep, args=(state, part), name=f"awc-{name}",
                                  daemon=True)
        self._threads[name] = thread
        thread.start()

    def dead(self) -> list[str]:
        """Names of the parts that exhausted their restart budget."""
        return sorted(name for name, s in self.parts.items() if s.status == "dead")

    def join(self, timeout: float) -> list[str]:
        """Wait for the parts to end, at most `timeout` in all; the stragglers."""
        end = time.monotonic() + timeout
        for thread in self._threads.values():
            thread.join(max(end - time.monotonic(), 0.0))
        return sorted(n for n, t in self._threads.items() if t.is_alive())

    def _delay(self, restarts: int) -> float:
        return reconnect_delay(restarts - 1, self._jitter, first=self.base_delay,
                               cap=self.max_delay)

    def _keep(self, state: PartState, part: Part) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            state.status = "running"
            try:
                part(self.stop)
                if self.stop.is_set():
                    break
                state.last_error = "returned unexpectedly"
            except Exception as error:
                state.last_error = f"{type(error).__name__}: {error}"
                self.events.log("error", "part_crashed", part=state.name,
                                error=state.last_error,
                                traceback=traceback.format_exc(limit=20))
            if time.monotonic() - started >= self.healthy_secs:
                state.restarts = 0  # it was healthy: a fresh budget
            if state.restarts >= self.budget:
                state.status = "dead"
                self.events.log("error", "part_dead", part=state.name,
                                restarts=state.total_restarts)
                return
            state.restarts += 1
            state.total_restarts += 1
            state.status = "restarting"
            delay = self._delay(state.restarts)
            state.delays.append(delay)
            self.events.log("warning", "part_restarting", part=state.name,
                            attempt=state.restarts, delay_s=round(delay, 3))
            self.stop.wait(delay)
        state.status = "stopped"
