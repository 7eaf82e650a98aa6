"""Prometheus metrics (SPEC §9) for every driver but the Lambda (which uses EMF).

Each instrument keeps at most 128 distinct label sets; later ones are
recorded under the label value `cardinality_overflow`, so a producer that
invents kinds cannot blow up the exposition. The engine reports once per
flush (`processed`) rather than once per job, and updates are aggregated
there: counters get one `inc(n)` per label set.
"""

from __future__ import annotations

import threading
import time
from collections import Counter as Tally
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from tick.events import LABEL_SET_LIMIT, OVERFLOW, JobEvent

if TYPE_CHECKING:
    from prometheus_client.metrics import MetricWrapperBase
OUTCOMES = frozenset({"completed", "failed", "cancelled", "retried", "discarded", "other"})
DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900)
TICK_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)


class Capped:
    """An instrument whose label sets stop growing at 128."""

    def __init__(self, metric: MetricWrapperBase) -> None:
        self._metric = metric
        self._seen: set[tuple[str, ...]] = set()
        self._lock = threading.Lock()

    def labels(self, *values: str) -> Any:
        key = tuple(values)
        if key not in self._seen:
            with self._lock:
                if key not in self._seen:
                    if len(self._seen) >= LABEL_SET_LIMIT - 1:
                        key = tuple(OVERFLOW for _ in values)
                    self._seen.add(key)
        return self._metric.labels(*key)


class Metrics:
    """The SPEC §9 instruments in one registry, plus the queue gauges."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        self.jobs = Capped(Counter(
            "awc_background_jobs", "Processed jobs by kind and outcome.",
            ["kind", "outcome"], registry=r))
        self.lag = Capped(Gauge(
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
        self.ready = Capped(Gauge(
            "awc_queue_ready_jobs", "Jobs ready to run (sampled, capped).", ["kind"],
            registry=r))
        self.oldest = Capped(Gauge(
            "awc_queue_oldest_ready_age_seconds", "Age of the oldest ready job.", ["kind"],
            registry=r))
        self._sampled: set[str] = set()

    # The engine's Observer -----------------------------------------------------

    def claimed(self, kind: str, wait_s: float) -> None:
        self.wait.labels(kind).observe(max(wait_s, 0.0))

    def processed(self, events: list[JobEvent]) -> None:
        tally: Tally[tuple[str, str]] = Tally()
        for e in events:
            outcome = e.outcome if e.outcome in OUTCOMES else "other"
            tally[(e.kind, outcome)] += 1
            self.duration.labels(e.kind).observe(e.duration_s)
            self.lag.labels(e.kind).set(max(e.lag_s, 0.0))
        for (kind, outcome), n in tally.items():
            self.jobs.labels(kind, outcome).inc(n)

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
            self.ready.labels(kind).set(int(ready))
            self.oldest.labels(kind).set(max(float(oldest or 0.0), 0.0))
        for kind in self._sampled - seen:
            self.ready.labels(kind).set(0)
            self.oldest.labels(kind).set(0)
        self._sampled |= seen

    def exposition(self) -> bytes:
        """Every instrument in the Prometheus text format."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry) + generate_latest(self.success_registry)
