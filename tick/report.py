"""`TickReport` (SPEC §6): what one tick did, with exactly the spec's keys.

Below history, events, metrics and the engine, so each reads it without an
import upward. Its counters are listed once, here (`COUNTERS`), derived from
its fields: the history row's columns, the Lambda's published metrics and
the tables that show them all read that list.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from tick.words import REPORT_FIELD, FireStatus, Label, StopReason


@dataclass(slots=True)
class TickReport:
    """Counts of one tick. Jobs are counted by the state their outcome left
    them in: a Retry at max_attempts is `failed`; an outcome dropped because
    the job was cancelled is `cancelled`, one dropped because it was rescued or
    re-claimed is `discarded`."""

    claimed: int = 0
    completed: int = 0
    retried: int = 0
    failed: int = 0
    cancelled: int = 0
    released: int = 0
    discarded: int = 0
    continued: int = 0  # jobs handed to a later claim with their state (SPEC §17)
    rescued: int = 0
    pruned: int = 0
    fired: int = 0  # schedule fires enqueued by this tick's maintenance (SPEC §15)
    stop_reason: StopReason = "drained"
    duration_s: float = 0.0

    def count(self, label: Label) -> None:
        """Count one processed job under its outcome label (SPEC §9)."""
        field = REPORT_FIELD[label]
        setattr(self, field, getattr(self, field) + 1)

    def as_dict(self) -> dict[str, Any]:
        """The report as the keys of `awc tick --json` and the Lambda's return."""
        # Flat fields: read them directly (dataclasses.asdict deep-copies,
        # a measurable share of a warm Lambda invocation with nothing to do).
        data = {name: getattr(self, name) for name in _FIELDS}
        data["duration_s"] = round(self.duration_s, 6)
        return data

    def summary(self) -> str:
        """One human line."""
        return (
            f"claimed={self.claimed} completed={self.completed} retried={self.retried} "
            f"failed={self.failed} cancelled={self.cancelled} released={self.released} "
            f"discarded={self.discarded} continued={self.continued} rescued={self.rescued} "
            f"pruned={self.pruned} fired={self.fired} "
            f"stop_reason={self.stop_reason} duration_s={self.duration_s:.3f}"
        )


_FIELDS = tuple(f.name for f in fields(TickReport))

# Every count of the report, in field order: every field but how and when it
# stopped. A field added to TickReport is counted everywhere at once.
COUNTERS: tuple[str, ...] = tuple(
    name for name in _FIELDS if name not in ("stop_reason", "duration_s")
)


def metric_name(counter: str) -> str:
    """The name a counter is published under as a metric: `Tick<Counter>`."""
    return f"Tick{counter.capitalize()}"


# (counter, metric name) for every counter: what the Lambda publishes.
COUNTER_METRICS: tuple[tuple[str, str], ...] = tuple((c, metric_name(c)) for c in COUNTERS)


class ScheduleFire(NamedTuple):
    """One ledger row a maintenance pass recorded (SPEC §15)."""

    schedule: str
    fire_at: datetime
    status: FireStatus
    job_id: int | None  # the job it enqueued, if it did


class FireReport(Protocol):
    """What a maintenance pass (or one schedule's part of it) fired, as the
    events and metrics report it: its ledger rows, how late each schedule's
    last enqueued fire was, and the schedules it could not plan."""

    @property
    def fires(self) -> Sequence[ScheduleFire]: ...

    @property
    def parked(self) -> Sequence[tuple[str, str]]: ...  # (schedule, why)

    @property
    def unplanned(self) -> Sequence[tuple[str, str]]: ...  # (schedule, why): this host's fault


# Seconds late per schedule: (schedule, lag) pairs.
Lags = Iterable[tuple[str, float]]
