"""Prometheus metrics (SPEC §9) for every driver but the Lambda (which uses EMF).

Each instrument keeps at most 128 distinct label sets; later ones are
recorded under the label value `cardinality_overflow`, so a producer that
invents kinds cannot blow up the exposition. The engine reports once per
flush (`processed`) rather than once per job, and updates are aggregated
there: counters get one `inc(n)` per label set.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter as Tally
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from tick.events import LABEL_SET_LIMIT, OVERFLOW, JobEvent, label_value
from tick.report import Lags, ScheduleFire

if TYPE_CHECKING:
    from prometheus_client.metrics import MetricWrapperBase
DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900)
TICK_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)


class Capped:
    """An instrument whose label sets stop growing at 128, and whose label
    values are at most 100 characters (SPEC §9): the rest go to OVERFLOW."""

    def __init__(self, metric: MetricWrapperBase) -> None:
        self._metric = metric
        self._seen: set[tuple[str, ...]] = set()
        self._lock = threading.Lock()

    def key(self, values: tuple[str, ...]) -> tuple[str, ...]:
        """The label set `values` are recorded under."""
        if values in self._seen:
            return values
        overflow = tuple(OVERFLOW for _ in values)
        if any(label_value(v) is OVERFLOW for v in values):
            return overflow
        with self._lock:
            if values not in self._seen:
                if len(self._seen) >= LABEL_SET_LIMIT - 1:
                    return overflow
                self._seen.add(values)
        return values

    def labels(self, *values: str) -> Any:
        return self._metric.labels(*self.key(tuple(values)))


# How many label sets a gauge's overflow series remembers to sum over: as
# many kinds as the ready jobs' sample can hold (ready_by_kind.sql reads at
# most 100,000 jobs); remembered by hash, about 100 bytes each. (At 10,000,
# 20,000 kinds ready read as 10,128 jobs.)
OVERFLOW_MEMBERS_LIMIT = 100_000


class CappedGauge(Capped):
    """A capped gauge whose overflow series holds the sum over the label sets
    it stands for (SPEC §9), not the last writer's value: a kind that drains
    to 0 takes only its own share away."""

    def __init__(self, metric: MetricWrapperBase) -> None:
        super().__init__(metric)
        # By the label set's hash: a producer's kinds can be megabytes each,
        # and ten thousand remembered whole grew a loop by 147 MB a round.
        self._members: dict[int, float] = {}
        self._total = 0.0

    def set(self, values: tuple[str, ...], value: float) -> None:
        key = self.key(values)
        series: Any = self._metric.labels(*key)
        if key == values:
            series.set(value)
            return
        member = hash(values)
        with self._lock:
            self._total -= self._members.pop(member, 0.0)
            if value:
                self._members[member] = value
                self._total += value
                if len(self._members) > OVERFLOW_MEMBERS_LIMIT:  # forget the oldest
                    self._total -= self._members.pop(next(iter(self._members)))
            total = self._total if self._members else 0.0
        series.set(total)

    def drop(self, values: tuple[str, ...]) -> None:
        """Forget the label set `values`: its series goes (or its share of
        the overflow), and its place under the cap is free for another."""
        with self._lock:
            if values in self._seen:
                self._seen.discard(values)
                with contextlib.suppress(KeyError):
                    self._metric.remove(*values)
                return
            if hash(values) not in self._members:
                return
            self._total -= self._members.pop(hash(values))
            total = self._total if self._members else 0.0
        series: Any = self._metric.labels(*tuple(OVERFLOW for _ in values))
        series.set(total)


class Metrics:
    """The SPEC §9 instruments in one registry, plus the queue gauges."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        self.jobs = Capped(Counter(
            "awc_background_jobs", "Processed jobs by kind and outcome.",
            ["kind", "outcome"], registry=r))
        self.lag = CappedGauge(Gauge(
            "awc_background_job_lag_seconds", "Ready-to-processed lag of the last job.",
            ["kind"], registry=r))
        self.api_errors = Capped(Counter(
            "awc_api_errors", "Transient store or database errors.", ["component"],
            registry=r))
        self.duration = Capped(Histogram(
            "awc_job_duration_seconds", "Handler run time.", ["kind"],
            buckets=DURATION_BUCKETS, registry=r))
        self.wait = Capped(Histogram(
            "awc_job_wait_seconds", "Ready-to-claimed wait.", ["kind"],
            buckets=DURATION_BUCKETS, registry=r))
        self.tick_duration = Capped(Histogram(
            "awc_tick_duration_seconds", "Tick wall time.", ["driver"],
            buckets=TICK_BUCKETS, registry=r))
        # Its own registry, pushed only after a success: a failed run must
        # never overwrite the last success (SPEC §9, Pushgateway).
        self.success_registry = CollectorRegistry(auto_describe=True)
        self.last_success = Capped(Gauge(
            "awc_tick_last_success_timestamp_seconds",
            "Unix time of the end of the last tick that ended without error.", ["driver"],
            registry=self.success_registry))
        self.ready = CappedGauge(Gauge(
            "awc_queue_ready_jobs", "Jobs ready to run (sampled, capped).", ["kind"],
            registry=r))
        self.oldest = CappedGauge(Gauge(
            "awc_queue_oldest_ready_age_seconds", "Age of the oldest ready job.", ["kind"],
            registry=r))
        self.schedule_fires = Capped(Counter(
            "awc_schedule_fires", "Schedule fires recorded, by status.", ["schedule", "status"],
            registry=r))
        self.schedule_lag = CappedGauge(Gauge(
            "awc_schedule_lag_seconds", "How late the last enqueued fire was enqueued.",
            ["schedule"], registry=r))
        self.held_back = CappedGauge(Gauge(
            "awc_limit_held_back_jobs",
            "Ready jobs a saturated global limit holds back (sampled, capped).",
            ["scope", "name"], registry=r))
        # SPEC §23: a per-key limit's busiest keys (tick.limits.BUSIEST), never every key.
        self.key_running = CappedGauge(Gauge(
            "awc_limit_key_running_jobs",
            "RUNNING jobs of a per-key limit's busiest keys (sampled, at most 20 a limit).",
            ["scope", "name", "key"], registry=r))
        self._sampled: set[str] = set()
        self._limits: set[tuple[str, str]] = set()
        self._keys: set[tuple[str, str, str]] = set()
        self._zeroed: set[tuple[str, str, str]] = set()  # read 0 last sample; go next

    # The engine's Observer -----------------------------------------------------

    def claimed(self, kind: str, wait_s: float) -> None:
        self.wait.labels(kind).observe(max(wait_s, 0.0))

    def processed(self, events: list[JobEvent]) -> None:
        tally: Tally[tuple[str, str]] = Tally()
        for e in events:
            tally[(e.kind, e.outcome)] += 1
            self.duration.labels(e.kind).observe(e.duration_s)
            self.lag.set((e.kind,), max(e.lag_s, 0.0))
        for (kind, outcome), n in tally.items():
            self.jobs.labels(kind, outcome).inc(n)

    def schedules_fired(self, fires: Sequence[ScheduleFire], lags: Lags) -> None:
        tally: Tally[tuple[str, str]] = Tally(
            (schedule, status) for schedule, _, status, _ in fires)
        for (schedule, status), n in tally.items():
            self.schedule_fires.labels(schedule, status).inc(n)
        for schedule, lag in lags:
            self.schedule_lag.set((schedule,), lag)

    # Drivers -------------------------------------------------------------------

    def api_error(self, component: str) -> None:
        self.api_errors.labels(component).inc()

    def tick_finished(self, driver: str, duration_s: float, ok: bool) -> None:
        self.tick_duration.labels(driver).observe(duration_s)
        if ok:
            self.last_success.labels(driver).set(time.time())

    def sample_queue(self, conn: Any) -> None:
        """Refresh the queue gauges from a bounded read of ready jobs; a kind
        that was seen before and has no ready job now reads 0."""
        from tick.statements import sql

        seen = set()
        for kind, ready, oldest in conn.execute(sql("ready_by_kind")).fetchall():
            seen.add(kind)
            self.ready.set((kind,), int(ready))
            self.oldest.set((kind,), max(float(oldest or 0.0), 0.0))
        for kind in self._sampled - seen:
            self.ready.set((kind,), 0)
            self.oldest.set((kind,), 0)
        self._sampled = seen  # the rest read 0 now: nothing more to remember
        self._sample_limits(conn)

    def _sample_limits(self, conn: Any) -> None:
        """The held-back gauge of every limit (SPEC §18); a cleared one reads 0."""
        from tick.limits import list_limits

        limits = set()
        keys = set()
        for row in list_limits(conn):
            key = (row["scope"], row["name"])
            limits.add(key)
            self.held_back.set(key, int(row["held_back"]))
            for busy in row["busiest"] or ():
                keys.add((*key, str(busy["key"])))
                self.key_running.set((*key, str(busy["key"])), int(busy["running"]))
        for key in self._limits - limits:
            self.held_back.set(key, 0)
        # No longer among the busiest: it reads 0 for one sample, then its
        # series goes, and its place under the cap with it. Kept at 0, every
        # key once busy kept a series, and past 127 no new busy key was named.
        for gone in self._zeroed - keys:
            self.key_running.drop(gone)
        self._zeroed = self._keys - keys
        for gone in self._zeroed:
            self.key_running.set(gone, 0)
        self._limits = limits
        self._keys = keys

    def exposition(self) -> bytes:
        """Every instrument in the Prometheus text format."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry) + generate_latest(self.success_registry)
