"""SPEC §4.2 "No row stops the queue": every timestamp PostgreSQL accepts is
handled, by the claim, the operator commands and the handlers."""

from __future__ import annotations

import json
import signal
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest

from tests.support import run_awc, spawn, wait_for
from tick import tick
from tick.engine.registry import Registry, handler
from tick.producer import EnqueueError, enqueue, enqueue_many

ODD_INSTANTS = ("infinity", "-infinity", "20000-01-01 00:00:00+00", "0044-03-15 00:00:00+00 BC")


def insert(conn: psycopg.Connection[Any], kind: str, run_at: str) -> int:
    row = conn.execute("INSERT INTO awc.jobs (kind, run_at) VALUES (%s, %s::timestamptz) "
                       "RETURNING id", (kind, run_at)).fetchone()
    assert row is not None
    return int(row[0])


def test_no_run_at_stops_the_claim(conn: psycopg.Connection[Any]) -> None:
    reg = Registry()
    handler("k", registry=reg)(lambda ctx, p: None)
    ids = {at: insert(conn, "k", at) for at in ODD_INSTANTS}
    normal = enqueue(conn, "k")
    report = tick(conn, registry=reg, max_secs=30)
    states = dict(conn.execute("SELECT id, state FROM awc.jobs").fetchall())
    # -infinity and BC are in the past: ready now. infinity and 20000 AD: never yet.
    assert report.completed == 3 and report.stop_reason == "drained"
    assert states[ids["-infinity"]] == states[ids[ODD_INSTANTS[3]]] == "COMPLETED"
    assert states[normal] == "COMPLETED"
    assert states[ids["infinity"]] == states[ids[ODD_INSTANTS[2]]] == "PENDING"


def test_operator_commands_show_timestamps_python_cannot_hold(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    ids = [insert(conn, "k", at) for at in ODD_INSTANTS]
    listed = run_awc(awc_env, "jobs", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    run_ats = {json.loads(line)["id"]: json.loads(line)["run_at"]
               for line in listed.stdout.splitlines()}
    assert run_ats[ids[0]] == "infinity" and run_ats[ids[1]] == "-infinity"
    assert run_ats[ids[2]] == "20000-01-01 00:00:00+00"
    shown = run_awc(awc_env, "jobs", "show", str(ids[0]))
    assert shown.returncode == 0 and json.loads(shown.stdout)["run_at"] == "infinity"
    table = run_awc(awc_env, "jobs", "list")
    assert table.returncode == 0 and "infinity" in table.stdout
    status = run_awc(awc_env, "status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["by_state"]["PENDING"] == 4


@pytest.mark.parametrize("expires_at", ["infinity", "20000-01-01"])
def test_a_workspace_that_never_expires_stays_active(
    db_url: str, conn: psycopg.Connection[Any], expires_at: str
) -> None:
    from tick.handlers.runtime import runtime
    from tick.handlers.stores.memory import MemoryStore

    from tests.support import configure_handlers as configure
    from tests.support import drain

    configure(db_url, MemoryStore())
    conn.execute("INSERT INTO awc.tenants (id) VALUES ('acme')")
    workspace = conn.execute(
        "INSERT INTO awc.workspaces (tenant_id, expires_at) VALUES ('acme', %s::timestamptz) "
        "RETURNING id", (expires_at,)).fetchone()[0]
    enqueue(conn, "workspace_expire", {"workspace_id": str(workspace)})
    report = drain(conn)
    assert report.completed == 1 and report.failed == 0 and report.retried == 0
    state = conn.execute("SELECT state FROM awc.workspaces WHERE id = %s", (workspace,))
    assert state.fetchone() == ("ACTIVE",)
    runtime().close()


# Every instant PostgreSQL accepts that Python's datetime cannot hold, and
# one a year's hour short of PostgreSQL's last (adding an hour to it fails).
EVERY_ODD_INSTANT = (*ODD_INSTANTS, "294276-12-31 23:30:00+00")


@pytest.mark.parametrize("instant", EVERY_ODD_INSTANT)
def test_no_timestamp_in_schedules_ticks_limits_or_the_ledger_stops_a_tick(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], instant: str
) -> None:
    """SPEC §4.2, §15, §16, §18: every timestamp column awc reads besides the
    jobs' (a schedule's, the ledger's, a tick's, a limit claim's) may hold
    any instant PostgreSQL accepts; ticks, maintenance and the operator
    commands go on, and a schedule due from before the year 1 is parked
    while the others fire."""
    from tick.schedules import Schedule, add

    add(conn, Schedule("odd", "* * * * *", "noop"))
    add(conn, Schedule("good", "* * * * *", "noop"))
    conn.execute("UPDATE awc.schedules SET next_fire_at = %s::timestamptz, "
                 "last_fire_at = %s::timestamptz, created_at = %s::timestamptz, "
                 "updated_at = %s::timestamptz WHERE name = 'odd'", (instant,) * 4)
    conn.execute("UPDATE awc.schedules SET next_fire_at = now() - interval '1 minute' "
                 "WHERE name = 'good'")
    conn.execute("INSERT INTO awc.schedule_fires (schedule, fire_at, status, recorded_at) "
                 "VALUES ('odd', %s::timestamptz, 'missed', %s::timestamptz)", (instant,) * 2)
    for driver in ("tick", "loop", "lambda", "maintenance"):
        conn.execute("INSERT INTO awc.ticks (driver, worker_id, started_at, finished_at) "
                     "VALUES (%s, 'w', %s::timestamptz, %s::timestamptz)",
                     (driver, instant, instant))
        conn.execute("INSERT INTO awc.ticks (driver, worker_id, started_at, deadline_at) "
                     "VALUES (%s, 'w', %s::timestamptz, %s::timestamptz), "
                     "(%s, 'w', %s::timestamptz, NULL)",
                     (driver, instant, instant, driver, instant))
    conn.execute("INSERT INTO awc.limits (scope, name, rate, per_secs) VALUES ('kind', 'noop', "
                 "1000, 60)")
    conn.execute("INSERT INTO awc.limit_claims (scope, name, at) "
                 "VALUES ('kind', 'noop', %s::timestamptz)", (instant,))
    ready = enqueue(conn, "noop")

    ticked = run_awc(awc_env, "tick", "--max-secs", "20")
    assert ticked.returncode == 0, ticked.stderr
    maintained = run_awc(awc_env, "maintenance", "tick")
    assert maintained.returncode == 0, maintained.stderr
    state = conn.execute("SELECT state FROM awc.jobs WHERE id = %s", (ready,)).fetchone()
    assert state == ("COMPLETED",)
    fired = conn.execute("SELECT count(*) FROM awc.schedule_fires WHERE schedule = 'good' "
                         "AND status = 'enqueued'").fetchone()
    assert fired is not None and fired[0] >= 1
    odd = conn.execute("SELECT next_fire_at IS NULL, next_fire_at = %s::timestamptz "
                       "FROM awc.schedules WHERE name = 'odd'", (instant,)).fetchone()
    early = instant.startswith("-") or instant.endswith("BC")
    assert odd == ((True, None) if early else (False, True))  # parked, or not due yet

    for args in (("status",), ("status", "--json"), ("ticks",), ("ticks", "--json"),
                 ("ticks", "--failed"), ("schedules", "list"), ("schedules", "list", "--json"),
                 ("schedules", "history", "odd"), ("schedules", "history", "odd", "--json"),
                 ("limits", "list"), ("limits", "list", "--json")):
        shown = run_awc(awc_env, *args)
        assert shown.returncode == 0, (args, shown.stderr)
        assert "Traceback" not in shown.stderr
    status = json.loads(run_awc(awc_env, "status", "--json").stdout)
    # A tick cannot finish after now: a future finished_at never hides the real last tick.
    assert 0 <= status["last_ticks"]["tick"]["age_s"] < 600


@pytest.mark.parametrize("instant", ["-infinity", "0044-03-15 00:00:00+00 BC"])
def test_the_loop_keeps_its_maintenance_whatever_a_schedule_holds(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], instant: str
) -> None:
    """SPEC §4.2, §7.2, §15: with a schedule due from before the year 1, the
    loop's maintenance still rescues and fires the others every pass."""
    from tick.schedules import Schedule, add

    add(conn, Schedule("odd", "* * * * *", "noop"))
    add(conn, Schedule("good", "* * * * *", "noop"))
    conn.execute("UPDATE awc.schedules SET next_fire_at = %s::timestamptz WHERE name = 'odd'",
                 (instant,))
    conn.execute("UPDATE awc.schedules SET next_fire_at = now() - interval '1 minute' "
                 "WHERE name = 'good'")
    lost = enqueue(conn, "noop")
    conn.execute("UPDATE awc.jobs SET state = 'RUNNING', attempts = 1, "
                 "claim_token = gen_random_uuid(), locked_by = 'gone-1', "
                 "locked_until = now() - interval '1 minute' WHERE id = %s", (lost,))
    proc = spawn({**awc_env, "AWC_MAINTENANCE_INTERVAL_SECS": "1"}, "loop")
    try:
        wait_for(lambda: conn.execute(
            "SELECT 1 FROM awc.schedule_fires WHERE schedule = 'good' AND status = 'enqueued'"
        ).fetchone(), timeout=30, what="the good schedule's fire")
        wait_for(lambda: conn.execute("SELECT state FROM awc.jobs WHERE id = %s", (lost,))
                 .fetchone() == ("COMPLETED",), timeout=30, what="the lost job rescued and run")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert conn.execute("SELECT next_fire_at FROM awc.schedules WHERE name = 'odd'"
                        ).fetchone() == (None,)


# Offsets Python allows and PostgreSQL does not read in text: 16 hours and
# more, a fraction of a second. enqueue_many sends instants as text.
ODD_OFFSETS = (timedelta(hours=16), timedelta(hours=-23, minutes=-59, seconds=-59),
               timedelta(hours=5, seconds=15, microseconds=5), timedelta(hours=23, minutes=59))


@pytest.mark.parametrize("offset", ODD_OFFSETS, ids=str)
@pytest.mark.parametrize("path", ["enqueue", "array", "copy", "after"])
def test_every_enqueue_path_stores_an_instant_of_any_offset_python_has(
        conn: psycopg.Connection[Any], offset: timedelta, path: str) -> None:
    """The same instant on every path (the single INSERT sent them; the
    array and the COPY were refused by PostgreSQL with a raw error)."""
    at = datetime(2026, 1, 1, 12, tzinfo=timezone(offset))
    parent = enqueue(conn, "k")
    jobs: list[dict[str, Any]] = {
        "enqueue": [], "array": [{"kind": "k", "run_at": at}],
        "copy": [{"kind": "k", "run_at": at}] * 300,
        "after": [{"kind": "k", "run_at": at, "after": [parent]}]}[path]
    first = enqueue(conn, "k", run_at=at) if path == "enqueue" else enqueue_many(conn, jobs)[0]
    row = conn.execute("SELECT run_at FROM awc.jobs WHERE id = %s", (first,)).fetchone()
    assert row == (at,)


@pytest.mark.parametrize("at", [datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=16))),
                                datetime.max.replace(tzinfo=timezone(timedelta(hours=-20))),
                                # offsets PostgreSQL reads in text: sent as they are
                                datetime(1, 1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
                                datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-14)))],
                         ids=["year-0-in-utc", "year-10000-in-utc", "year-0-at-plus-14",
                              "year-10000-at-minus-14"])
def test_an_instant_past_the_years_1_to_9999_in_utc_is_refused_alike_everywhere(
        conn: psycopg.Connection[Any], at: datetime) -> None:
    before = conn.execute("SELECT count(*) FROM awc.jobs").fetchone()
    with pytest.raises(EnqueueError, match=r"^run_at: is outside the years 1 to 9999 in UTC"):
        enqueue(conn, "k", run_at=at)
    late = [{"kind": "k"}] * 299 + [{"kind": "k", "run_at": at}]  # the COPY, past a chunk
    for jobs in ([{"kind": "k", "run_at": at}], late):
        with pytest.raises(EnqueueError, match=rf"^job {len(jobs) - 1}: run_at: is outside"):
            enqueue_many(conn, jobs)
    assert conn.execute("SELECT count(*) FROM awc.jobs").fetchone() == before
