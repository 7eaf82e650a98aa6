"""SPEC §26: leases the engine renews, apart from a job's timeout, seen from
real `awc loop` processes: a job longer than its lease keeps it without a
heartbeat, a killed loop's job comes back once its short lease ends, an
operator's cancel reaches the handler within a renewal interval, and a
database gone for longer than half the lease cancels the run, which runs
again exactly once."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.kinds import LEDGER_DDL
from tests.lease_kinds import LEASE_RUNS_DDL
from tests.silent_proxy import SilentProxy
from tests.support import free_port, http_get, http_up, job_row, run_awc, spawn, wait_for
from tick.producer import enqueue

LEASE = 4  # AWC_WORKER_LEASE_SECS of every loop here
pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def env(awc_env: dict[str, str], conn: psycopg.Connection[Any]) -> dict[str, str]:
    conn.execute(LEASE_RUNS_DDL)
    return {**awc_env, "AWC_HANDLER_MODULES": "tests.kinds,tests.lease_kinds",
            "AWC_WORKER_LEASE_SECS": str(LEASE), "AWC_MAINTENANCE_INTERVAL_SECS": "1",
            "AWC_WORKER_POLL_INTERVAL_MS": "500", "AWC_STOP_GRACE_SECS": "1",
            "TEST_LEDGER_URL": awc_env["DATABASE_URL"]}


@pytest.fixture
def proxy(server_url: str) -> Iterator[SilentProxy]:
    found = SilentProxy(server_url)
    yield found
    found.close()


def stop_loop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    return err


def runs(conn: psycopg.Connection[Any], job_id: int) -> list[dict[str, Any]]:
    cur = conn.execute(
        "SELECT attempt, pid, extract(epoch FROM started)::float8 AS started, "
        "extract(epoch FROM stopped)::float8 AS stopped, cancelled, remaining "
        "FROM test_lease_runs WHERE job_id = %s ORDER BY started", (job_id,))
    names = [d.name for d in cur.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def db_epoch(conn: psycopg.Connection[Any]) -> float:
    row = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
    assert row is not None
    return float(row[0])


def lease_left(conn: psycopg.Connection[Any], job_id: int) -> float | None:
    row = conn.execute("SELECT extract(epoch FROM locked_until - clock_timestamp())::float8 "
                       "FROM awc.jobs WHERE id = %s AND state = 'RUNNING'", (job_id,)).fetchone()
    return None if row is None else float(row[0])


def test_a_job_four_times_its_lease_runs_once_without_heartbeats_and_is_never_rescued(
    conn: psycopg.Connection[Any], env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "long_sleep", {"seconds": 4 * LEASE})
    first, second = spawn(env, "loop"), spawn(env, "loop")  # the second rescues what lapses
    try:
        wait_for(lambda: runs(conn, job_id), what="the job to start")
        shortest = float(LEASE)
        while job_row(conn, job_id)["state"] == "RUNNING":
            left = lease_left(conn, job_id)
            if left is not None:
                shortest = min(shortest, left)
            time.sleep(0.1)
        job = job_row(conn, job_id)
        assert (job["state"], job["attempts"]) == ("COMPLETED", 1)
        assert len(runs(conn, job_id)) == 1  # one run, never rescued and run again
        # Renewed once half spent, a lease never came near its end.
        assert shortest > 0.5, f"the lease came within {shortest:.2f} s of lapsing"
    finally:
        stop_loop(first)
        stop_loop(second)


def test_a_killed_loops_job_is_rescued_once_its_short_lease_ends(
    conn: psycopg.Connection[Any], env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "long_sleep", {"seconds": 20, "first_only": True})
    doomed = spawn(env, "loop")
    rescuer = None
    try:
        wait_for(lambda: runs(conn, job_id), what="the job to start")
        rescuer = spawn(env, "loop")
        wait_for(lambda: conn.execute("SELECT count(*) FROM pg_stat_activity WHERE "
                                      "datname = current_database() "
                                      "AND query LIKE 'LISTEN%%'").fetchone() == (2,),
                 what="the second loop")
        time.sleep(1.0)  # a renewal or two
        killed_at = db_epoch(conn)
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(timeout=10)
        wait_for(lambda: job_row(conn, job_id)["state"] == "COMPLETED", timeout=30,
                 what="the rescued job to complete")
        again = runs(conn, job_id)
        assert [r["attempt"] for r in again] == [1, 2]
        waited = again[1]["started"] - killed_at
        # Its lease (4 s, renewed at most once half spent) plus the rescuer's
        # maintenance interval (1 s), its poll (0.5 s) and a margin for a loaded
        # machine: not the 20 s of the job.
        assert waited < LEASE + 4, f"rescued {waited:.1f} s after the kill"
    finally:
        if doomed.poll() is None:  # a failed wait above left it running
            doomed.kill()
            doomed.wait(timeout=10)
        if rescuer is not None:
            stop_loop(rescuer)


def test_an_operator_cancel_stops_the_handler_within_one_renewal_interval(
    conn: psycopg.Connection[Any], env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "long_wait", {"seconds": 30})
    proc = spawn(env, "loop")
    try:
        wait_for(lambda: runs(conn, job_id), what="the job to start")
        time.sleep(2.5)  # past the claims' first fence check and renewal
        cancelled_at = db_epoch(conn)
        done = run_awc(env, "cancel", str(job_id), "--yes")
        assert done.returncode == 0, done.stderr
        stopped = wait_for(lambda: runs(conn, job_id)[0]["stopped"], timeout=10,
                           what="the handler to stop")
        assert runs(conn, job_id)[0]["cancelled"] is True
        assert stopped - cancelled_at <= LEASE / 2 + 1.0
        assert job_row(conn, job_id)["state"] == "CANCELLED"
    finally:
        err = stop_loop(proc)
    assert "Traceback" not in err


@pytest.mark.parametrize("gone", ["cut", "fall_silent"])
def test_a_database_gone_past_half_the_lease_cancels_the_run_which_is_retried_once(
    conn: psycopg.Connection[Any], env: dict[str, str], proxy: SilentProxy, gone: str
) -> None:
    """Cut (connections refused), or silent on its open sockets: a silent
    database held the engine's exchange for the watchdog's minute, so the
    run went on past its lease while another worker rescued the job and ran
    it too (SPEC §26: never twice at once). An exchange now answers before a
    lease is three quarters spent, or counts as failed."""
    port = free_port()
    # No maintenance pass after the first (one a minute): the job comes back
    # by the run's own Retry("lease lost"), not by a rescue of its lapsed lease.
    through = {**env, "DATABASE_URL": proxy.url_for(env["DATABASE_URL"]),
               "AWC_METRICS_PORT": str(port), "AWC_MAINTENANCE_INTERVAL_SECS": "60"}
    job_id = enqueue(conn, "long_wait", {"seconds": 40, "first_only": True})
    proc = spawn(through, "loop")
    try:
        wait_for(lambda: runs(conn, job_id), what="the job to start")
        wait_for(lambda: http_up(f"http://127.0.0.1:{port}/readyz"), what="readiness")
        time.sleep(1.5)
        cut_at = db_epoch(conn)
        getattr(proxy, gone)()
        stopped = wait_for(lambda: runs(conn, job_id)[0]["stopped"], timeout=10,
                           what="the run to cancel itself")
        # It gave up before its lease could lapse: half a lease after its
        # last renewal, which came at most half a lease before the cut.
        assert stopped - cut_at <= LEASE, f"cancelled {stopped - cut_at:.1f} s after the cut"
        status, body = http_get(f"http://127.0.0.1:{port}/readyz")
        assert status == 503 and "database" in body, body
        time.sleep(max(0.0, cut_at + LEASE / 2 + 1.0 - db_epoch(conn)))  # longer than half
        proxy.answer()
        wait_for(lambda: job_row(conn, job_id)["state"] == "COMPLETED", timeout=40,
                 what="the retried job to complete")
        job = job_row(conn, job_id)
        assert job["attempts"] == 2
        assert [r["attempt"] for r in runs(conn, job_id)] == [1, 2]  # retried exactly once
        errors = conn.execute("SELECT errors::text FROM awc.jobs WHERE id = %s",
                              (job_id,)).fetchone()
        assert errors is not None and "LeaseLost" in errors[0]
        wait_for(lambda: http_get(f"http://127.0.0.1:{port}/readyz")[0] == 200, timeout=10,
                 what="readiness after the outage")
    finally:
        proxy.answer()
        err = stop_loop(proc)
    assert "Traceback" not in err


def test_a_connection_lost_for_a_moment_costs_no_run(
    conn: psycopg.Connection[Any], env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "long_sleep", {"seconds": 8})
    proc = spawn({**env, "AWC_WORKER_LEASE_SECS": "6"}, "loop")
    try:
        wait_for(lambda: runs(conn, job_id), what="the job to start")
        killed = 0
        for _ in range(3):
            time.sleep(1.0)
            # The loop's own connections (the listener's aside): its engine's too.
            row = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = 'awc' AND datname = current_database() "
                "AND pid <> pg_backend_pid() AND query NOT LIKE 'LISTEN%%'").fetchone()
            killed += row[0] if row else 0
        assert killed >= 3
        wait_for(lambda: job_row(conn, job_id)["state"] == "COMPLETED", timeout=30,
                 what="the job to complete")
        assert job_row(conn, job_id)["attempts"] == 1
        assert len(runs(conn, job_id)) == 1
    finally:
        stop_loop(proc)


REFUSE_RENEWALS = """
CREATE FUNCTION test_refuse_renewal() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'renewals refused by the test';
END;
$$;
CREATE TRIGGER test_refuse_renewal BEFORE UPDATE ON awc.jobs FOR EACH ROW
    WHEN (OLD.kind = 'long_wait' AND OLD.state = 'RUNNING' AND NEW.state = 'RUNNING'
          AND NEW.locked_until > OLD.locked_until)
    EXECUTE FUNCTION test_refuse_renewal()
"""


def test_renewals_the_database_refuses_pause_claims_say_why_and_give_up_at_half_the_lease(
    conn: psycopg.Connection[Any], env: dict[str, str]
) -> None:
    port = free_port()
    conn.execute(LEDGER_DDL)
    conn.execute(REFUSE_RENEWALS)
    job_id = enqueue(conn, "long_wait", {"seconds": 30, "first_only": True})
    proc = spawn({**env, "AWC_METRICS_PORT": str(port), "AWC_MAINTENANCE_INTERVAL_SECS": "60"},
                 "loop")
    try:
        wait_for(lambda: runs(conn, job_id), what="the job to start")

        def unready() -> str | None:
            status, body = http_get(f"http://127.0.0.1:{port}/readyz")
            return body if status == 503 else None

        body = wait_for(unready, timeout=10, what="/readyz to say the renewals fail")
        assert "lease renewals failing" in body and "claiming paused" in body, body
        waiting = enqueue(conn, "ledger")  # not claimed while renewals fail
        stopped = wait_for(lambda: runs(conn, job_id)[0]["stopped"], timeout=10,
                           what="the run to give up")
        started = runs(conn, job_id)[0]["started"]
        assert stopped - started <= LEASE, "it gave up after its lease could lapse"
        # The retry waits out its backoff (5-10 s) first; the bound leaves a
        # loaded machine room to claim and run it after that.
        wait_for(lambda: job_row(conn, job_id)["state"] == "COMPLETED", timeout=60,
                 what="the retried job to complete")
        assert job_row(conn, job_id)["attempts"] == 2
        assert "LeaseLost" in job_row(conn, job_id)["errors"][0]["error"]
        wait_for(lambda: job_row(conn, waiting)["state"] == "COMPLETED", timeout=10,
                 what="claims to resume")
        row = conn.execute("SELECT extract(epoch FROM started_at)::float8 FROM awc.jobs "
                           "WHERE id = %s", (waiting,)).fetchone()
        assert row is not None and row[0] >= stopped - 0.5  # claimed once the run gave up
        assert http_get(f"http://127.0.0.1:{port}/readyz")[0] == 200
    finally:
        err = stop_loop(proc)
    assert "Traceback" not in err
