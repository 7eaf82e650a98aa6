"""The `awc tick` driver (SPEC §7.1): startup, one tick, report."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from tick.drivers.compose import (
    engine_for,
    open_database,
    prepare_handlers,
    record_failure,
    tick_spec,
)
from tick.engine.api import Engine
from tick.errors import AwcError
from tick.events import StreamEvents
from tick.report import TickReport
from tick.settings import Settings


def run_cli_tick(
    settings: Settings,
    *,
    kinds: list[str],
    queues: list[str],
    stop: threading.Event,
    on_engine: Callable[[Engine], Any] | None = None,
) -> TickReport:
    """Start up in the SPEC §3 order, run one tick with the settings' budget,
    and export its metrics when a textfile or Pushgateway is configured."""
    began = time.monotonic()
    exporting = bool(settings.metrics_textfile or settings.pushgateway_url)
    metrics = None
    if exporting:
        from tick.metrics import Metrics  # prometheus-client only when asked for

        metrics = Metrics()
    if settings.metrics_textfile:
        from tick.export import check_textfile

        check_textfile(settings.metrics_textfile)  # before any job runs (SPEC §2)
    ok = False
    try:
        report = _tick(settings, kinds, queues, stop, on_engine, began, metrics)
        ok = True
    finally:
        if metrics is not None:
            try:
                _export(settings, metrics, time.monotonic() - began, ok)
            except AwcError:
                if ok:
                    raise
                # The tick already failed: its own error is the one to report.
                StreamEvents(settings.log_format).log("warning", "metrics_export_failed")
    return report


def _export(settings: Settings, metrics: Any, duration: float, ok: bool) -> None:
    from http.client import HTTPException  # here: 15 ms of imports a tick without one skips

    from tick.export import push, write_textfile

    metrics.tick_finished("tick", duration, ok)
    if settings.metrics_textfile:
        try:
            write_textfile(metrics, settings.metrics_textfile, ok)
        except OSError as error:
            raise AwcError(f"AWC_METRICS_TEXTFILE: cannot write the file "
                           f"({error.strerror or error})") from None
    if settings.pushgateway_url:
        try:
            push(metrics, settings.pushgateway_url, settings.worker_id, ok)
        except (OSError, ValueError, HTTPException) as error:
            # The tick's work is done and recorded; a missed push is only a
            # gap. Named by type: a message could quote the URL.
            StreamEvents(settings.log_format).log(
                "warning", "pushgateway_failed", error=type(error).__name__)


def _tick(
    settings: Settings,
    kinds: list[str],
    queues: list[str],
    stop: threading.Event,
    on_engine: Callable[[Engine], Any] | None,
    began: float,
    metrics: Any,
) -> TickReport:
    from tick.db import CONNECT_TIMEOUT_SECS
    from tick.watchdog import DEADLINE_GRACE_SECS

    deadline = began + settings.tick_max_secs
    # From connect on, nothing waits on the database past the deadline and
    # its grace, even a server that keeps its socket open and never answers;
    # a connection lost as the schema is checked is ridden out (0035).
    conn = open_database(settings, answer_by=deadline + DEADLINE_GRACE_SECS,
                         ride_out_until=deadline - CONNECT_TIMEOUT_SECS)
    try:
        prepare_handlers(settings)
        engine = engine_for(settings, conn, events=StreamEvents(settings.log_format),
                            observer=metrics)
        if on_engine is not None:
            on_engine(engine)
        spec = tick_spec(settings, deadline=deadline, kinds=kinds, queues=queues, driver="tick")
        try:
            report = engine.run(spec, stop)
        except AwcError as error:
            record_failure(settings, spec.history, engine.last_tick_id, error,
                           report=engine.last_report)
            raise
        if metrics is not None:
            metrics.sample_queue(engine.conn)  # what is left for the next tick
        return report
    finally:
        conn.close()
