"""What the coordinator uses of the `Engine` that runs it (SPEC §6).

The coordinator (coordinator.py) is handed the engine of `Engine.run`
(api.py), which builds it: it sees the engine through this protocol only,
so it depends on what it uses, not on the engine's face above it.
"""

from __future__ import annotations

from queue import SimpleQueue
from typing import TYPE_CHECKING, Any, Protocol

from tick.engine.backoff import Jitter
from tick.engine.leases import Leases
from tick.engine.registry import Registry
from tick.engine.slots import SlotPool
from tick.engine.spec import Maintenance, Observer
from tick.events import EventSink
from tick.report import TickReport

if TYPE_CHECKING:
    import psycopg


class EngineParts(Protocol):
    """What the coordinator uses of the `Engine` that runs it (tick.engine.api),
    and nothing else: its connection and how to replace it, the parts a run
    hands work to, and the two fields a run writes back."""

    worker_id: str
    registry: Registry
    events: EventSink
    observer: Observer
    maintenance: Maintenance | None
    pool: SlotPool
    outbox: SimpleQueue[Any]  # slots -> coordinator
    last_tick_id: int | None  # written: the history row a failure is recorded on
    last_report: TickReport | None  # written: the counts a failure is recorded with
    unreachable_since: float | None  # written: while the lost database is retried
    leases: Leases | None  # written: the current run's renewed leases (read by /readyz)

    @property
    def conn(self) -> psycopg.Connection[Any]: ...

    def reconnect(self, deadline: float | None = None) -> None: ...

    def dsn(self) -> str: ...  # for a handler's own reads (SPEC §20)

    def slot_name(self, n: int) -> str: ...

    def jitter(self, slot: str) -> Jitter: ...
