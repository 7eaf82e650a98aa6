"""`awc loop` and `awc maintenance run` (SPEC §7.2, §7.3): the long-running roles.

The loop is the tick engine run continuously: a slot that frees is refilled
by the next claim, and once the queue drains the engine waits for `NOTIFY
awc_jobs` (the listener part wakes it) or the poll interval. Parts run under
the supervisor; a lost database is counted and retried, never fatal.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tick.db import as_database_error, connect
from tick.drivers.compose import (
    START_RIDE_OUT_SECS,
    connector,
    engine_for,
    loop_spec,
    maintenance_of,
    open_database,
    prepare_handlers,
    record_failure,
)
from tick.drivers.supervisor import Supervisor
from tick.engine.api import Engine
from tick.engine.backoff import Jitter, reconnect_delay
from tick.engine.maintain import maintain
from tick.engine.spans import maintenance_pass
from tick.errors import AwcError, DatabaseError
from tick.events import DetachedEvents, EventSink, StreamEvents
from tick.history import TickStart
from tick.metrics import Metrics
from tick.report import TickReport
from tick.settings import Settings

LISTEN_CHANNEL = "awc_jobs"
# A listening connection lost after this long was healthy: the next
# reconnect waits the first delay again. So does a run of the tick runner.
LISTEN_HELD_SECS = RUN_HELD_SECS = 30.0


@dataclass
class Failing:
    """A part's failures since it last held (SPEC §7.2): the tick runner's
    runs, or the maintenance part's passes."""

    settle_secs: float  # how long a run again goes without failing to count as well
    since: float | None = None  # the first failure of this streak
    why: str = ""  # the last one's `awc:` text
    attempts: int = 0
    again: float | None = None  # when the runner last started a run
    what: str = "the tick runner"
    shown_from: int = 1  # the failures in a row before /readyz says so

    @classmethod
    def of_maintenance(cls) -> Failing:
        """The maintenance part's: two failed passes in a row (no rescue, no
        schedule fires meanwhile) are in /readyz until a pass holds."""
        return cls(settle_secs=0.0, what="maintenance", shown_from=2)

    def failed(self, began: float, why: str) -> int:
        """A run that began at `began` failed: the streak's attempts so far.
        A run that held RUN_HELD_SECS starts a new streak (and backoff)."""
        now = time.monotonic()
        if self.since is None or now - began >= RUN_HELD_SECS:
            self.since, self.attempts = began, 0
        self.why, self.attempts, self.again = why, self.attempts + 1, None
        return self.attempts

    def trouble(self, now: float) -> str | None:
        """What /readyz says while failing and until a run holds settle_secs."""
        if self.since is None or self.attempts < self.shown_from or (
                self.again is not None and now - self.again >= self.settle_secs):
            return None
        return f"{self.what} failing for {now - self.since:.0f} s ({self.why[:200]})"


def listener_part(settings: Settings, engine: Engine, metrics: Metrics, events: EventSink) -> Any:
    """LISTEN on a dedicated connection and wake the engine on each NOTIFY.

    Behind a transaction-pooling proxy notifications never arrive; the poll
    interval still finds the work.
    """

    def part(stop: threading.Event) -> None:
        import psycopg

        attempt = 0
        jitter = Jitter(f"{settings.worker_id}-listener")
        while not stop.is_set():
            listening = None
            try:
                with connect(settings.dsn(), prepare=False, purpose="listener") as conn:
                    conn.execute(f"LISTEN {LISTEN_CHANNEL}")
                    listening = time.monotonic()
                    engine.wake()  # anything inserted while we were not listening
                    while not stop.is_set():
                        for _ in conn.notifies(timeout=1.0, stop_after=1):
                            engine.wake()
            except (psycopg.Error, DatabaseError) as error:
                # The delay starts again only after a connection that held:
                # one the server ends at once (a role's idle_session_timeout
                # ends an idle LISTEN) reconnected twice a second, for ever.
                if listening is not None and time.monotonic() - listening >= LISTEN_HELD_SECS:
                    attempt = 0
                metrics.api_error("listener")
                events.log("warning", "listener_lost", error=type(error).__name__,
                           detail=str(as_database_error(error, "listening", None)))
                stop.wait(reconnect_delay(attempt, jitter))
                attempt += 1

    return part


def maintenance_part(settings: Settings, metrics: Metrics, events: EventSink, *,
                     driver: str, busy: Callable[[], int] | None = None,
                     failing: Failing | None = None) -> Any:
    """Rescue, fire due schedules and prune every
    `AWC_MAINTENANCE_INTERVAL_SECS`, on its own connection, and refresh the
    queue gauges. Each pass is a row of the history under `driver` (SPEC
    §16); for the loop only while idle (`busy` counts its busy stretches,
    which have rows of their own, ended; -1 while one is open). `failing`
    keeps its failed passes for /readyz."""

    step = maintenance_of(settings)

    def part(stop: threading.Event) -> None:
        from tick.db import session_lost

        conn = None
        stretches = busy() if busy else 0
        while not stop.is_set():
            began, fresh = time.monotonic(), conn is None or conn.closed
            try:
                if conn is None or conn.closed:  # `fresh`, as the type checker reads it
                    conn = connect(settings.dsn(), prepare=settings.db_prepare,
                                   purpose="maintenance")
                now_busy = busy() if busy else 0
                # Idle: no stretch ended since the last pass and none is open
                # (a stretch counts when it ends: during a long one each pass
                # wrote a row of its own, claimed 0, beside the stretch's).
                idle = now_busy == stretches and now_busy >= 0
                stretches = now_busy
                start = TickStart(driver, settings.worker_id) if idle else None
                with maintenance_pass(driver, settings.worker_id) as reported:  # SPEC §21
                    done, report = maintain(conn, step, events=events, observer=metrics,
                                            start=start, alone=True)
                    reported.append(report)
                if failing is not None:
                    failing.since = None
                _sample_queue(conn, metrics, events)
                if done.rescued or done.rescued_failed or done.pruned or done.fired:
                    events.log("info", "maintenance", rescued=done.rescued,
                               rescued_failed=done.rescued_failed, pruned=done.pruned,
                               fired=done.fired)
            except Exception as error:
                import psycopg

                if not isinstance(error, psycopg.Error | DatabaseError):
                    raise
                lost = conn is not None and session_lost(conn, error)
                if conn is not None:
                    conn.close()
                conn = None
                if lost and not fresh:  # ended while it idled (a restart, an idle
                    continue            # timeout): a new connection now, not a pass later
                metrics.api_error("maintenance")
                detail = str(as_database_error(error, "maintenance", None))
                events.log("warning", "maintenance_failed", error=type(error).__name__,
                           detail=detail)
                if failing is not None:
                    failing.failed(began, detail)
            stop.wait(settings.maintenance_interval_secs)
        if conn is not None:
            conn.close()

    return part


def _sample_queue(conn: Any, metrics: Metrics, events: EventSink) -> None:
    """The queue gauges after a pass; a failure is theirs, not the pass's."""
    try:
        metrics.sample_queue(conn)
    except Exception as error:
        import psycopg

        if not isinstance(error, psycopg.Error):
            raise
        events.log("warning", "queue_sample_failed", error=type(error).__name__)


def metrics_part(
    settings: Settings, supervisor: Supervisor, metrics: Metrics, events: EventSink,
    troubles: Callable[[], list[str]] | None = None,
) -> Any:
    """Serve /metrics, /healthz and /readyz when AWC_METRICS_PORT is set;
    `/readyz` is 503 while a part is dead or the database keeps the process
    from working (`troubles`, by default a stuck exchange).

    The port is bound here, at startup: one that cannot be bound is a startup
    error (SPEC §7.2), not a part that crash-loops. A restarted part binds
    again.
    """
    from tick.drivers.health import make_server, serve_until

    assert settings.metrics_port is not None
    address, port = settings.metrics_address, settings.metrics_port

    def bind() -> Any:
        return make_server(address, port, supervisor, metrics.exposition, events, troubles)

    try:
        bound = [bind()]
    except OSError as error:
        import socket

        # A name that does not resolve is the address's fault; the rest
        # (in use, not allowed), the port's.
        name_failed = isinstance(error, socket.gaierror)
        setting = "AWC_METRICS_ADDRESS" if name_failed else "AWC_METRICS_PORT"
        raise AwcError(f"{setting}: cannot listen on {address}:{port} "
                       f"({error.strerror or error})") from None

    def part(stop: threading.Event) -> None:
        serve_until(bound.pop() if bound else bind(), stop)

    return part


def run_loop(
    settings: Settings,
    stop: threading.Event,
    *,
    on_engine: Any = None,
    kinds: list[str] | None = None,
    queues: list[str] | None = None,
) -> None:
    """Start up (SPEC §3), run the supervised parts until `stop`, drain, return."""
    # Written by a thread of its own: a stream nobody reads never stops a part.
    events = DetachedEvents(settings.log_format)
    try:
        _run_loop(settings, stop, events, on_engine, kinds, queues)
    finally:
        events.close(5.0)


def _run_loop(settings: Settings, stop: threading.Event, events: DetachedEvents,
              on_engine: Any, kinds: list[str] | None, queues: list[str] | None) -> None:
    metrics = Metrics()
    conn = open_database(settings, purpose="tick-runner",
                         ride_out_until=time.monotonic() + START_RIDE_OUT_SECS)
    engines: list[Engine] = []
    # A run that ran again this long without failing (a claim in each poll)
    # makes the process ready again.
    failing = Failing(settle_secs=max(5.0, 2 * settings.worker_poll_interval_ms / 1000))
    maintenance = Failing.of_maintenance()

    def troubles() -> list[str]:
        # A stuck exchange, the engine retrying a lost database (SPEC §7.2),
        # the tick runner failing, or its lease renewals failing (SPEC §26).
        from tick.drivers.health import database_troubles

        found = database_troubles(lambda: engines[0].unreachable_since if engines else None)
        leases = engines[0].leases if engines else None
        why = leases.trouble(time.monotonic()) if leases is not None else None
        runner = failing.trouble(time.monotonic())
        passes = maintenance.trouble(time.monotonic())
        return [*found, *([runner] if runner else []), *([why] if why else []),
                *([passes] if passes else [])]

    try:
        prepare_handlers(settings)
        supervisor = Supervisor(stop, events=events)
        serve_metrics = (metrics_part(settings, supervisor, metrics, events, troubles)
                         if settings.metrics_port is not None else None)
    except BaseException:
        conn.close()
        raise
    # Maintenance runs as its own part; the engine reconnects by itself.
    engine = engine_for(settings, conn, events=events, observer=metrics, maintenance=False,
                        connect=connector(settings, purpose="tick-runner"))
    engines.append(engine)
    if on_engine is not None:
        on_engine(engine)

    stretches = [0]

    def report(tick: TickReport) -> None:
        """A busy stretch ended: its metrics, its event, its history row."""
        metrics.tick_finished("loop", tick.duration_s, ok=True)
        events.log("info", "tick", driver="loop", **tick.as_dict())
        stretches[0] += 1  # its history row the engine wrote (SPEC §16)

    spec = loop_spec(settings, on_report=report, kinds=kinds, queues=queues)

    jitter = Jitter(f"{settings.worker_id}-tick-runner")

    def tick_runner(stop: threading.Event) -> None:
        # A database error the engine did not ride out (a refusal: a
        # failover's read-only first seconds, a revoked privilege) is no
        # crash of the part: five in a row made it dead, and the loop idled
        # for good once the database was writable again (SPEC §7.2: the loop
        # never exits for a transient database error). It runs again after a
        # backoff, /readyz 503 naming the error meanwhile.
        while not stop.is_set():
            began = failing.again = time.monotonic()
            try:
                last = engine.run(spec, stop)
            except DatabaseError as error:
                metrics.api_error("database")
                metrics.tick_finished("loop", time.monotonic() - began, ok=False)
                if engine.last_tick_id is not None:  # the busy stretch it ended (SPEC §16)
                    record_failure(settings, spec.history, engine.last_tick_id, error,
                                   report=engine.last_report)
                # The next run opens a connection of its own: a database's or
                # role's settings (a failover's read-only default, reset) reach
                # new sessions only, and the old one refused for ever.
                engine.close()
                attempts = failing.failed(began, str(error))
                events.log("error", "tick_failed", error=str(error), attempt=attempts)
                stop.wait(reconnect_delay(attempts - 1, jitter))
                continue
            if last.claimed:
                report(last)
            return

    supervisor.add("tick-runner", tick_runner)
    supervisor.add("listener", listener_part(settings, engine, metrics, events))
    supervisor.add("maintenance", maintenance_part(
        settings, metrics, events, driver="loop",
        # a stretch's row is open while the engine has one to record on
        busy=lambda: stretches[0] if engine.last_tick_id is None else -1,
        failing=maintenance))
    if serve_metrics is not None:
        supervisor.add("metrics-server", serve_metrics)
    events.log("info", "loop_started", worker_id=settings.worker_id,
               concurrency=settings.worker_concurrency)
    stop.wait()
    stragglers = supervisor.join(settings.stop_grace_secs + 10)
    events.log("info", "loop_stopped", stragglers=stragglers)
    engine.close()


def run_maintenance_role(settings: Settings, stop: threading.Event) -> None:
    """`awc maintenance run`: maintenance only, never a claim."""
    events = StreamEvents(settings.log_format)
    metrics = Metrics()
    # Connect and migrate first (SPEC §3).
    open_database(settings, ride_out_until=time.monotonic() + START_RIDE_OUT_SECS).close()
    supervisor = Supervisor(stop, events=events)
    failing = Failing.of_maintenance()

    def troubles() -> list[str]:
        from tick.drivers.health import database_troubles

        passes = failing.trouble(time.monotonic())
        return [*database_troubles(), *([passes] if passes else [])]

    serve_metrics = (metrics_part(settings, supervisor, metrics, events, troubles)
                     if settings.metrics_port is not None else None)
    supervisor.add("maintenance", maintenance_part(settings, metrics, events,
                                                   driver="maintenance", failing=failing))
    if serve_metrics is not None:
        supervisor.add("metrics-server", serve_metrics)
    stop.wait()
    supervisor.join(10)
