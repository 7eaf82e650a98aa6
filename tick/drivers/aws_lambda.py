"""The AWS Lambda entry point (SPEC §8): one tick per invocation.

`template.yaml` names `tick.drivers.aws_lambda.handler`. The deadline is the
invocation's remaining time less `AWC_LAMBDA_MARGIN_SECS`. The connection is
opened on first use and kept across warm invocations without a ping
(`lambda_warm`); migrations run on a cold start only. When a warm
connection turns out dead at the tick's first statement, before anything of
the tick was recorded, the tick runs once more on a new connection. Job
failures are data in the returned report; only infrastructure faults (the
database, a bad setting, a malformed event) raise, so Lambda counts an error.

Its parts: the event (`lambda_event`), the database secret
(`lambda_secret`), what a warm environment keeps (`lambda_warm`), and here
the events, the metrics and the handler; `lambda_invoke` runs it locally.

This module imports neither click nor prometheus-client, and boto3 only when
the object store is S3 or the connection comes from Secrets Manager.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections import Counter as Tally
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit, single_metric

from tick.drivers.compose import engine_for, record_failure, tick_spec
from tick.drivers.lambda_event import correlation_text, parse_event
from tick.drivers.lambda_secret import database_url
from tick.drivers.lambda_warm import Warm
from tick.errors import DatabaseError
from tick.events import (
    LABEL_SET_LIMIT,
    OVERFLOW,
    JobEvent,
    bridge_logging_to,
    event_kind,
    label_value,
)
from tick.report import COUNTER_METRICS, Lags, ScheduleFire, TickReport
from tick.words import LEVEL

NAMESPACE = "awc"
logger = Logger(service="awc")
metrics = Metrics(namespace=NAMESPACE, service="awc")
# powertools warns on stderr whenever a flush finds nothing to publish: an
# invocation that failed before its report (a bad event, a lost database),
# or an EMF record that reached 100 values and flushed itself. Neither is
# news to an operator, and stderr should carry only awc's own lines.
warnings.filterwarnings("ignore", message="No application metrics to publish",
                        category=UserWarning)


class LambdaEvents:
    """Job events and log lines through the powertools Logger (JSON, with the
    Lambda context and correlation id)."""

    def jobs(self, events: Any) -> None:
        for e in events:
            # SPEC §21: the job span's ids beside the Logger's own keys (its
            # xray_trace_id is the invocation's), so a log query joins the two.
            ids = {} if e.trace_id is None else {"trace_id": e.trace_id, "span_id": e.span_id}
            self.log(LEVEL[e.outcome], f"job_{e.job_id}", job_id=e.job_id, kind=event_kind(e.kind),
                     outcome=e.outcome, state=e.state, attempts=e.attempts,
                     duration_ms=round(e.duration_s * 1000, 3), **ids)

    def log(self, level: str, event: str, **fields: Any) -> None:
        write = {"warning": logger.warning, "error": logger.error}.get(level, logger.info)
        # A field named like a LogRecord attribute makes `logging` refuse the
        # whole record (KeyError): a `message` (a library record's) is the
        # line's message, any other such name gets a trailing underscore.
        message = fields.pop("message", event)
        write(message, extra={"event": event, **{
            f"{k}_" if k in _RECORD_ATTRIBUTES else k: v for k, v in fields.items()}})


# The attributes of every LogRecord, which `extra` may not name.
_RECORD_ATTRIBUTES = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


# psycopg's warnings (a connection lost mid-tick), a handler's log records
# and Python warnings reach the root logger, whose handler in the Lambda
# runtime prints plain text: they go through the Logger as `library_log`
# events instead, JSON with the invocation's keys like every other line.
bridge_logging_to(LambdaEvents(), own=logger.name)

# EMF takes at most 100 values of one metric in one record.
EMF_VALUES_LIMIT = 100


@dataclass
class LambdaObserver:
    """Collects the SPEC §9 figures of one invocation for EMF: jobs by kind
    and outcome, API errors, and per kind the handler run time
    (JobDuration), ready-to-claimed wait (JobWait) and ready-to-processed
    lag (JobLag)."""

    outcomes: Tally[tuple[str, str]] = field(default_factory=Tally)
    api_errors: Tally[str] = field(default_factory=Tally)
    fires: Tally[str] = field(default_factory=Tally)  # schedule fires by status
    samples: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    def _sample(self, kind: str, name: str, value: float) -> None:
        self.samples.setdefault(kind, {}).setdefault(name, []).append(max(value, 0.0))

    def claimed(self, kind: str, wait_s: float) -> None:
        self._sample(label_value(kind), "JobWait", wait_s)

    def processed(self, events: list[JobEvent]) -> None:
        for e in events:
            kind = label_value(e.kind)  # a dimension value is bounded as a label is (SPEC §9)
            self.outcomes[(kind, e.outcome)] += 1
            self._sample(kind, "JobDuration", e.duration_s)
            self._sample(kind, "JobLag", e.lag_s)

    def api_error(self, component: str) -> None:
        self.api_errors[component] += 1

    def schedules_fired(self, fires: Sequence[ScheduleFire], lags: Lags) -> None:
        for _, _, status, _ in fires:
            self.fires[status] += 1

    def publish(self) -> None:
        """EMF records, at most 128 label sets per metric, then overflow."""
        kept: Tally[tuple[str, str]] = Tally()
        for n, (key, count) in enumerate(sorted(self.outcomes.items())):
            kept[key if n < LABEL_SET_LIMIT - 1 else (OVERFLOW, OVERFLOW)] += count
        self._publish_samples()
        for (kind, outcome), count in kept.items():
            with single_metric(name="BackgroundJobs", unit=MetricUnit.Count, value=count,
                               namespace=NAMESPACE) as metric:
                metric.add_dimension(name="kind", value=kind)
                metric.add_dimension(name="outcome", value=outcome)
        for status, count in self.fires.items():
            with single_metric(name="ScheduleFires", unit=MetricUnit.Count, value=count,
                               namespace=NAMESPACE) as metric:
                metric.add_dimension(name="status", value=status)
        for component, count in self.api_errors.items():
            with single_metric(name="ApiErrors", unit=MetricUnit.Count, value=count,
                               namespace=NAMESPACE) as metric:
                metric.add_dimension(name="component", value=component)

    def _publish_samples(self) -> None:
        merged: dict[str, dict[str, list[float]]] = {}
        for n, (kind, series) in enumerate(sorted(self.samples.items())):
            label = kind if n < LABEL_SET_LIMIT - 1 else OVERFLOW
            for name, values in series.items():
                merged.setdefault(label, {}).setdefault(name, []).extend(values)
        for kind, series in merged.items():
            longest = max(len(values) for values in series.values())
            for start in range(0, longest, EMF_VALUES_LIMIT):
                record = EphemeralMetrics(namespace=NAMESPACE)
                record.add_dimension(name="kind", value=kind)
                for name, values in series.items():
                    for value in values[start:start + EMF_VALUES_LIMIT]:
                        record.add_metric(name=name, unit=MetricUnit.Seconds, value=value)
                if record.metric_set:  # a metric that reached 100 values flushed itself
                    record.flush_metrics()


WARM = Warm()  # this execution environment's, across warm invocations


@metrics.log_metrics(capture_cold_start_metric=True)
@logger.inject_lambda_context(log_event=False)
def handler(event: Any, context: Any) -> dict[str, Any]:
    """Run one tick and return its report (SPEC §6 keys)."""
    try:
        return _invoke(event, context)
    except Exception as error:
        # The runtime logs the message of what leaves the handler: a secret
        # any library quoted in it (a URL setting's password) is replaced
        # first (SPEC §3). The type, and so Lambda's error count, stays.
        from tick.redaction import redacted

        message = str(error)
        if redacted(message) != message:
            error.args = (redacted(message),)
        raise


# The longest a Lambda function may run (its timeout's upper bound), seconds.
LAMBDA_MAX_SECS = 900


def _remaining_secs(context: Any) -> float:
    """The invocation's remaining time from its context, in seconds; a
    `ValueError` naming the context for what no Lambda gives (NaN, infinite,
    negative, past 15 minutes), never an arithmetic error naming nothing."""
    try:
        secs = float(context.get_remaining_time_in_millis()) / 1000
    except (TypeError, ValueError, OverflowError):
        secs = float("nan")
    if not 0 <= secs <= LAMBDA_MAX_SECS:
        raise ValueError("the invocation context's remaining time is not a number of "
                         "milliseconds from 0 to 900,000")
    return secs


def _invoke(event: Any, context: Any) -> dict[str, Any]:
    began = time.monotonic()
    parsed, correlation = parse_event(event)
    logger.set_correlation_id(correlation)
    settings = WARM.load()
    remaining = _remaining_secs(context)
    deadline = began + remaining - settings.lambda_margin_secs
    observer = LambdaObserver()
    from tick.db import CONNECT_TIMEOUT_SECS
    from tick.watchdog import DEADLINE_GRACE_SECS

    conn = WARM.connection(settings, deadline + DEADLINE_GRACE_SECS,
                           ride_out_until=deadline - CONNECT_TIMEOUT_SECS)
    WARM.prepare(settings)
    if WARM.engine is None:
        WARM.engine = engine_for(settings, conn, events=LambdaEvents(),
                                 connect=lambda: WARM.current(settings))
    engine = WARM.engine
    engine.observer = observer
    # The history row names the invocation: the scheduler's execution id, or
    # the request id (SPEC §16).
    request = correlation_text(getattr(context, "aws_request_id", None))
    spec = tick_spec(settings, deadline=deadline, max_jobs=parsed.max_jobs,
                     kinds=parsed.kinds, queues=parsed.queues, driver="lambda",
                     correlation_id=correlation or request)
    try:
        try:
            report = engine.run(spec)
        except DatabaseError as error:
            if not (error.connection_lost and WARM.reused and engine.last_tick_id is None):
                raise
            # The warm connection died while the environment was frozen (an
            # idle timeout, a failover): nothing of this tick was recorded,
            # so it runs once more, on a new connection.
            logger.warning("database connection lost; reconnecting",
                           extra={"event": "database_reconnect"})
            WARM.drop()
            WARM.connection(settings, deadline + DEADLINE_GRACE_SECS)
            report = engine.run(spec)
    except DatabaseError as error:
        observer.api_error("database")
        observer.publish()
        WARM.drop()
        record_failure(settings, spec.history, engine.last_tick_id, error,
                       dsn=lambda: database_url(settings), report=engine.last_report)
        raise
    _publish(report, observer)
    logger.info("tick", extra={"event": "tick", "driver": "lambda", **report.as_dict()})
    return report.as_dict()


def _publish(report: TickReport, observer: LambdaObserver) -> None:
    observer.publish()
    for counter, name in COUNTER_METRICS:
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=getattr(report, counter))
    metrics.add_metric(name="TickDuration", unit=MetricUnit.Seconds, value=report.duration_s)
    metrics.add_metric(name="TickLastSuccess", unit=MetricUnit.Count, value=1)
