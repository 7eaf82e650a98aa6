"""What a run of the engine is given (SPEC §6): its specification
(`RunSpec`), what observes it (`Observer`), how it opens its connection
(`Connect`) and its maintenance step (`Maintenance`).

These are the types the engine's parts, the drivers and the tests share. They
live below the parts that use them (claims, flush, the history row, the
coordinator) and below `api.py`, which builds an Engine from them, so none of
those reaches up to the engine's face for a type.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from tick.engine.registry import MAX_LEASE_SECS
from tick.events import JobEvent
from tick.history import TickStart
from tick.maintenance import MaintenanceResult
from tick.report import Lags, ScheduleFire, TickReport

if TYPE_CHECKING:
    import psycopg

    from tick.schedules.firing import Fired

Connect = Callable[[], "psycopg.Connection[Any]"]
# A maintenance pass; given a TickStart, it also inserts the tick's history
# row; given a deadline (a time.monotonic() instant), it ends by then, and
# hands each schedule's recorded fires to the reporter as it goes.
Maintenance = Callable[
    [
        "psycopg.Connection[Any]",
        "TickStart | None",
        "float | None",
        "Callable[[Fired], None] | None",
    ],
    MaintenanceResult,
]


class Observer(Protocol):
    """Receives what metrics need (SPEC §9); `tick.metrics` implements it."""

    def claimed(self, kind: str, wait_s: float) -> None: ...

    def processed(self, events: list[JobEvent]) -> None: ...

    def api_error(self, component: str) -> None: ...

    def schedules_fired(self, fires: Sequence[ScheduleFire], lags: Lags) -> None: ...


class NullObserver:
    """Records nothing."""

    def claimed(self, kind: str, wait_s: float) -> None:
        pass

    def processed(self, events: list[JobEvent]) -> None:
        pass

    def api_error(self, component: str) -> None:
        pass

    def schedules_fired(self, fires: Sequence[ScheduleFire], lags: Lags) -> None:
        pass


@dataclass(frozen=True, slots=True)
class RunSpec:
    """What one run of the engine may do."""

    max_jobs: int | None = None  # None: no limit
    deadline: float | None = None  # time.monotonic() instant; None: none
    concurrency: int = 4
    lease_secs: float = 300
    kinds: list[str] | None = None
    queues: list[str] | None = None
    stop_grace_secs: float = 30
    # The loop keeps claiming after the queue drained (on a wake or poll)
    # instead of ending the run, and reports each busy stretch as a tick.
    continuous: bool = False
    # The run rides out a lost connection by reconnecting (the loop; a tick
    # of the CLI, the Lambda or the demo while its deadline leaves time to
    # connect); not `tick()`'s, whose engine has the one connection given.
    reconnect: bool = False
    poll_interval_s: float = 1.0
    on_report: Callable[[TickReport], None] | None = None
    # Who runs this tick, for its row in awc.ticks (SPEC §16); None: no row.
    history: TickStart | None = None
    # The engine renews the leases of jobs whose timeout reaches past them
    # (SPEC §26). Off only to measure what that costs (bench/leases.py): then
    # no lease is renewed and the claim reads no job's own timeout.
    renew_leases: bool = True

    def __post_init__(self) -> None:
        # Bounds as SPEC §2 gives them: a lease PostgreSQL cannot add to now()
        # would fail every claim of the run, not this caller's call.
        if not 0 < self.lease_secs <= MAX_LEASE_SECS:
            raise ValueError(f"lease_secs must be in (0, {MAX_LEASE_SECS}]")
        if not 1 <= self.concurrency <= 256:
            raise ValueError("concurrency must be between 1 and 256")
        if self.max_jobs is not None and self.max_jobs < 1:
            raise ValueError("max_jobs must be at least 1")
        if not 0 <= self.stop_grace_secs <= 86400:
            raise ValueError("stop_grace_secs must be between 0 and 86400")
