"""SPEC §16: every run of the engine has a row in awc.ticks: a tick, a loop's
busy stretch or idle interval, a Lambda invocation, a maintenance pass; a
failed one carries its `awc:` line, one killed before it finished is `died`."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from tests.exchanges import exchanges
from tests.support import (
    SCHEDULER_EVENT,
    Context,
    refuse_claims,
    registry_with,
    run_awc,
    spawn,
    wait_for,
)
from tick.producer import enqueue, enqueue_many


def rows(conn: psycopg.Connection[Any], driver: str | None = None) -> list[dict[str, Any]]:
    cur = conn.execute("SELECT * FROM awc.ticks WHERE %(d)s::text IS NULL OR driver = %(d)s "
                       "ORDER BY id", {"d": driver})
    columns = [c.name for c in cur.description or ()]
    return [dict(zip(columns, r, strict=True)) for r in cur.fetchall()]


def test_a_tick_records_its_row_with_its_report(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    enqueue_many(conn, [{"kind": "noop"}] * 3 + [{"kind": "fail"}])
    done = run_awc({**awc_env, "AWC_WORKER_ID": "host-7"}, "tick", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    (row,) = rows(conn)
    assert (row["driver"], row["worker_id"], row["error"]) == ("tick", "host-7", None)
    assert row["finished_at"] is not None and row["finished_at"] >= row["started_at"]
    assert timedelta(seconds=50) < row["deadline_at"] - row["started_at"] < timedelta(seconds=60)
    for key in ("claimed", "completed", "failed", "retried", "rescued", "pruned", "fired",
                "stop_reason"):
        assert row[key] == report[key], key


def test_a_tick_that_fails_records_its_awc_line(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    refuse_claims(conn)
    enqueue(conn, "noop")
    done = run_awc(awc_env, "tick")
    assert done.returncode == 1
    (row,) = rows(conn)
    assert row["finished_at"] is not None
    assert row["error"] == done.stderr.strip().splitlines()[-1]
    assert row["error"].startswith("awc: ") and "RaiseException" in row["error"]


def tick_after_quick_jobs(conn: psycopg.Connection[Any], env: dict[str, str], concurrency: int,
                          seconds: int, meanwhile: Callable[[], None]) -> tuple[int, str]:
    """`awc tick` over five no-op jobs and a patient one of `seconds`;
    `meanwhile` done once the five are recorded: its exit code and stderr."""
    enqueue_many(conn, [{"kind": "noop"}] * 5
                 + [{"kind": "patient", "payload": {"seconds": seconds}}])
    proc = spawn(env, "tick", "--max-secs", "30", "--concurrency", str(concurrency))
    try:
        wait_for(lambda: conn.execute("SELECT count(*) FROM awc.jobs WHERE state = 'COMPLETED'"
                                      ).fetchone() == (5,), what="the quick jobs' outcomes")
        meanwhile()
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err


def test_a_tick_that_fails_records_the_counts_it_had(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    """A tick that fails mid-run after claiming and completing jobs (here
    the server refuses its last claim): its row said claimed 0, completed
    0, though it had claimed and completed jobs."""
    def refuse_the_next_claim() -> None:
        refuse_claims(conn)
        enqueue(conn, "noop")  # claimed with the patient job's outcome, and refused

    code, err = tick_after_quick_jobs(conn, awc_env, 1, 2, refuse_the_next_claim)
    assert code == 1, err
    (row,) = wait_for(lambda: [r for r in rows(conn) if r["finished_at"] is not None],
                      what="the failed tick's row")
    assert row["error"] is not None and row["error"].startswith("awc: ")
    assert (row["claimed"], row["completed"], row["stop_reason"]) == (6, 5, None)


def test_a_tick_rides_out_a_lost_connection_and_records_every_outcome(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    """An administrator ends the tick's backend while a job runs (a failover,
    a pooler's restart): the tick connects again within its deadline and
    records the job's outcome; before, it exited 1 and the job waited for its
    lease to be rescued, an attempt spent."""
    def end_its_backend() -> None:
        ended = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND backend_type = 'client backend'").fetchone()
        assert ended is not None and ended[0] >= 1

    code, err = tick_after_quick_jobs(conn, awc_env, 8, 3, end_its_backend)
    assert code == 0, err
    assert "database_reconnected" in err and "Traceback" not in err
    states = conn.execute("SELECT state, attempts, count(*) FROM awc.jobs "
                          "GROUP BY state, attempts").fetchall()
    assert states == [("COMPLETED", 1, 6)]  # none run twice, none left to a rescue
    (row,) = rows(conn)
    assert row["error"] is None
    assert (row["claimed"], row["completed"], row["stop_reason"]) == (6, 6, "drained")


def test_awc_ticks_marks_the_died_and_filters(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    assert run_awc(awc_env, "tick").returncode == 0
    conn.execute(
        "INSERT INTO awc.ticks (driver, worker_id, started_at, deadline_at) VALUES "
        "('lambda', 'w', now() - interval '2 hours', now() - interval '2 hours' + "
        "interval '50 seconds'), "  # killed: never finished, its deadline long past
        "('tick', 'w', now(), now() + interval '55 seconds')")  # still running
    listed = json.loads(run_awc(awc_env, "ticks", "--json").stdout)
    assert [t["died"] for t in listed] == [False, False, True]  # newest first
    assert {"id", "driver", "worker_id", "correlation_id", "started_at", "finished_at",
            "deadline_at", "claimed", "fired", "stop_reason", "error", "died"} <= set(listed[0])
    failed = json.loads(run_awc(awc_env, "ticks", "--failed", "--json").stdout)
    assert [(t["driver"], t["died"]) for t in failed] == [("lambda", True)]
    only = json.loads(run_awc(awc_env, "ticks", "--driver", "lambda", "--json").stdout)
    assert [t["driver"] for t in only] == ["lambda"]
    since = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    recent = json.loads(run_awc(awc_env, "ticks", "--since", since, "--json").stdout)
    assert len(recent) == 2
    text = run_awc(awc_env, "ticks").stdout
    assert "died" in text.splitlines()[-1]
    bad = run_awc(awc_env, "ticks", "--since", "yesterday")
    assert bad.returncode == 2 and "--since" in bad.stderr


def test_status_shows_the_last_finished_tick_of_each_driver(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    assert run_awc(awc_env, "tick").returncode == 0
    assert run_awc(awc_env, "maintenance", "tick").returncode == 0
    status = json.loads(run_awc(awc_env, "status", "--json").stdout)
    assert set(status["last_ticks"]) == {"tick", "maintenance"}
    last = status["last_ticks"]["tick"]
    assert last["error"] is None and last["stop_reason"] == "drained" and last["age_s"] < 60
    assert "last tick tick:" in run_awc(awc_env, "status").stdout
    assert last["success_age_s"] is not None and last["success_age_s"] <= last["age_s"] + 1


def test_status_gives_the_age_of_the_last_successful_tick_while_ticks_keep_failing(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    # Issue 22 item 24: a tick failing every minute must still alert. `age_s`
    # is the last finished tick's; `success_age_s` the last successful one's.
    conn.execute(
        "INSERT INTO awc.ticks (driver, worker_id, started_at, finished_at, stop_reason, error)"
        " VALUES ('tick', 'w', now() - interval '3 hours', now() - interval '3 hours',"
        " 'drained', NULL),"
        " ('tick', 'w', now() - interval '1 minute', now() - interval '1 minute', NULL,"
        " 'database unreachable'),"
        " ('lambda', 'w', now() - interval '2 minutes', now() - interval '2 minutes', NULL,"
        " 'database unreachable')")
    status = json.loads(run_awc(awc_env, "status", "--json").stdout)
    tick, lam = status["last_ticks"]["tick"], status["last_ticks"]["lambda"]
    assert tick["error"] == "database unreachable" and 55 < tick["age_s"] < 600
    assert 3 * 3600 - 60 < tick["success_age_s"] < 3 * 3600 + 600
    assert lam["success_age_s"] is None and lam["last_success_at"] is None
    text = run_awc(awc_env, "status").stdout
    assert "last success: never" in text and "last success: 108" in text


def test_a_lambda_invocation_is_named_by_its_scheduler_execution(
    lam: Any, conn: psycopg.Connection[Any]
) -> None:

    enqueue(conn, "noop")
    report = lam.handler(SCHEDULER_EVENT, Context(10))
    (row,) = rows(conn, "lambda")
    assert row["correlation_id"] == SCHEDULER_EVENT["execution_id"]
    assert (row["completed"], row["stop_reason"]) == (report["completed"], report["stop_reason"])


def test_the_loop_records_busy_stretches_and_idle_intervals(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    proc = spawn({**awc_env, "AWC_MAINTENANCE_INTERVAL_SECS": "1"}, "loop")
    try:
        wait_for(lambda: rows(conn, "loop"), timeout=30, what="an idle interval's row")
        job = enqueue(conn, "noop")
        wait_for(lambda: any(r["completed"] for r in rows(conn, "loop")), timeout=30,
                 what="the busy stretch's row")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    loop_rows = rows(conn, "loop")
    busy = [r for r in loop_rows if r["claimed"]]
    assert busy and busy[0]["completed"] == 1 and busy[0]["finished_at"] is not None
    assert all(r["finished_at"] is not None for r in loop_rows)
    assert conn.execute("SELECT state FROM awc.jobs WHERE id = %s", (job,)).fetchone() \
        == ("COMPLETED",)


def test_the_history_is_pruned_by_its_own_setting(conn: psycopg.Connection[Any]) -> None:
    from tick.maintenance import prune

    conn.execute("INSERT INTO awc.ticks (driver, worker_id, started_at) VALUES "
                 "('tick', 'old', now() - interval '10 days'), ('tick', 'new', now())")
    prune(conn, 86400 * 365, force=True, ticks_after_secs=7 * 86400)
    assert [r["worker_id"] for r in rows(conn)] == ["new"]


def test_the_history_keeps_a_run_still_under_way(conn: psycopg.Connection[Any]) -> None:
    """A loop's stretch busy for longer than the history keeps: its open row
    (deadline renewed) was pruned, and the stretch's end recorded nothing.
    An unfinished row whose deadline passed (it died) goes as before."""
    from tick.maintenance import prune

    conn.execute("INSERT INTO awc.ticks (driver, worker_id, started_at, deadline_at) VALUES "
                 "('loop', 'busy', now() - interval '10 days', now() + interval '1 minute'), "
                 "('loop', 'died', now() - interval '10 days', now() - interval '9 days')")
    prune(conn, 86400 * 365, force=True, ticks_after_secs=7 * 86400)
    assert [r["worker_id"] for r in rows(conn)] == ["busy"]


def test_the_history_row_costs_no_round_trip(conn: psycopg.Connection[Any]) -> None:
    """SPEC §16: inserted and completed in statements the tick sends anyway,
    for a busy tick (one slot, so the exchanges are the same every run). An
    empty tick claims nothing (its maintenance pass found no job ready,
    decision 0040): one exchange without a row, and with one the row's
    completion goes in the second, where the claim went before."""
    import threading
    import time

    from tick.engine.api import Engine, RunSpec, maintenance_for
    from tick.history import TickStart

    engine = Engine(lambda: conn, registry=registry_with(noop=lambda ctx, payload: None),
                    maintenance=maintenance_for(86400.0))

    def tick(history: bool) -> None:
        start = TickStart("tick", "w-rt") if history else None
        spec = RunSpec(history=start, deadline=time.monotonic() + 30, concurrency=1)
        engine.run(spec, threading.Event())

    tick(False)  # warm: the first maintenance pass also prunes
    for jobs in (0, 4):
        counts = []
        for history in (False, True, False):
            enqueue_many(conn, [{"kind": "noop"}] * jobs)
            counts.append(exchanges(conn, lambda h=history: tick(h)))
        assert counts[0] == counts[2], counts  # the exchanges are deterministic
        if jobs:
            assert counts[1] == counts[0], f"{jobs} jobs: {counts}"
        else:
            assert counts == [1, 2, 1], counts
        row = rows(conn)[-1]
        assert row["finished_at"] is not None
        assert (row["claimed"], row["completed"], row["stop_reason"]) == (jobs, jobs, "drained")


def test_a_row_the_last_round_trip_foresaw_wrongly_is_corrected(
    conn: psycopg.Connection[Any], db_url: str
) -> None:
    """The closing statement counts the last outcomes as if each lands; one
    the fence refuses (its job cancelled meanwhile) is counted as it went."""
    import threading
    import time

    from tick.admin import cancel
    from tick.db import connect
    from tick.engine.api import Engine, RunSpec, maintenance_for
    from tick.history import TickStart

    def cancelled_meanwhile(ctx: Any, payload: Any) -> None:
        with connect(db_url) as other:
            cancel(other, ctx.job_id)

    engine = Engine(lambda: conn, registry=registry_with(
        noop=lambda ctx, payload: None, doomed=cancelled_meanwhile),
        maintenance=maintenance_for(86400.0))
    enqueue_many(conn, [{"kind": "noop"}, {"kind": "doomed", "priority": -1}])
    report = engine.run(RunSpec(history=TickStart("tick", "w"), concurrency=1,
                                deadline=time.monotonic() + 30), threading.Event())
    (row,) = rows(conn)
    assert (report.completed, report.cancelled) == (1, 1)
    assert (row["completed"], row["cancelled"], row["finished_at"] is not None) == (1, 1, True)


def test_psycopg_s_cleanup_lines_are_not_told_again() -> None:
    """A refused statement or a lost connection inside a pipeline made
    psycopg log "error ignored terminating <psycopg.Pipeline [INERROR]
    (host=... user=... database=...)>: pipeline aborted" after the error awc
    reports itself: a second, vaguer line naming where the database is."""
    import logging

    from tick.events import bridge_logging_to

    class Sink:
        def __init__(self) -> None:
            self.lines: list[dict[str, Any]] = []

        def jobs(self, events: Any) -> None:
            pass

        def log(self, level: str, event: str, **fields: Any) -> None:
            self.lines.append({"event": event, **fields})

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    sink = Sink()
    try:
        bridge_logging_to(sink)
        log = logging.getLogger("psycopg")
        log.warning("error ignored terminating %r: %s", "<psycopg.Pipeline host=db>", "aborted")
        log.warning("error ignored in rollback on %s: %s", "<conn host=db>", "closed")
        log.warning("connection pool is full")
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        logging.captureWarnings(False)
    assert [line["message"] for line in sink.lines] == ["connection pool is full"]


def test_a_ticks_row_opened_again_by_its_key_is_the_same_row(
    conn: psycopg.Connection[Any],
) -> None:
    """SPEC §16 (migration 0033): a tick whose first exchange's answer was
    lost sends the opening again; with the run's key it returns the row the
    first wrote, and a failed tick's record completes that row. Without a
    key (a loop's stretches, an older awc) every opening is a row."""
    from tick.history import TickStart, record
    from tick.queue import new_nonce
    from tick.statements import sql

    start = TickStart("tick", "w-key", deadline=None, row_key=new_nonce())
    first = conn.execute(sql("open_tick"), start.params()).fetchone()
    again = conn.execute(sql("open_tick"), start.params()).fetchone()
    assert first == again
    record(conn, start, None, error="awc: the database connection was lost")
    (row,) = rows(conn)
    assert row["id"] == first[0] and row["finished_at"] is not None
    assert row["error"] == "awc: the database connection was lost"
    keyless = TickStart("tick", "w-none")
    for _ in range(2):
        conn.execute(sql("open_tick"), keyless.params())
    record(conn, keyless, None, error="awc: x")
    assert len(rows(conn)) == 1 + 3
