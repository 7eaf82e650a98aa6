"""The `awc tick` driver (SPEC §7.1): startup, one tick, report."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from tick.engine import Engine, RunSpec
from tick.events import StreamEvents
from tick.registry import REGISTRY
from tick.report import TickReport
from tick.run_once import maintenance_for
from tick.settings import Settings
from tick.startup import open_database, prepare_handlers


def run_cli_tick(
    settings: Settings,
    *,
    kinds: list[str],
    queues: list[str],
    stop: threading.Event,
    on_engine: Callable[[Engine], Any] | None = None,
) -> TickReport:
    """Start up in the SPEC §3 order and run one tick with the settings' budget."""
    began = time.monotonic()
    deadline = began + settings.tick_max_secs
    conn = open_database(settings)
    try:
        prepare_handlers(settings, store_required=True)
        engine = Engine(
            conn,
            worker_id=settings.worker_id,
            registry=REGISTRY,
            events=StreamEvents(settings.log_format),
            maintenance=maintenance_for(settings.prune_after_secs),
        )
        if on_engine is not None:
            on_engine(engine)
        spec = RunSpec(
            max_jobs=settings.tick_max_jobs,
            deadline=deadline,
            concurrency=settings.worker_concurrency,
            lease_secs=settings.worker_lease_secs,
            kinds=kinds or None,
            queues=queues or None,
            stop_grace_secs=settings.stop_grace_secs,
        )
        return engine.run(spec, stop)
    finally:
        conn.close()
