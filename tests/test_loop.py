"""SPEC §7.2, §7.3: `awc loop` and `awc maintenance run` as real processes
with real signals: wake-ups, stops, outages, refused statements, metrics."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.kinds import LEDGER_DDL
from tests.support import (
    ROOT,
    awc_command,
    free_port,
    http_get,
    http_up,
    job_row,
    refuse_claims,
    run_awc,
    spawn,
    wait_for,
)
from tick.db import connect
from tick.maintenance import PRUNE_LOCK_KEY
from tick.producer import enqueue, enqueue_many


def stop_loop(proc: subprocess.Popen[str], timeout: float = 30) -> tuple[str, str]:
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    return out, err


def started_after(conn: psycopg.Connection[Any], job_id: int) -> float | None:
    row = conn.execute(
        "SELECT extract(epoch FROM l.at - j.created_at) FROM test_ledger l "
        "JOIN awc.jobs j ON j.id = l.job_id WHERE l.job_id = %s", (job_id,)).fetchone()
    return None if row is None else float(row[0])


def test_notify_starts_a_plain_sql_insert_within_a_second(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    proc = spawn({**awc_env, "AWC_WORKER_POLL_INTERVAL_MS": "60000"}, "loop")
    try:
        # Let the loop reach its idle wait, so only NOTIFY can wake it.
        wait_for(lambda: conn.execute("SELECT count(*) FROM pg_stat_activity WHERE "
                                      "datname = current_database() "
                                      "AND query LIKE 'LISTEN%%'").fetchone() == (1,),
                 what="the listener")
        time.sleep(0.5)
        row = conn.execute("INSERT INTO awc.jobs (kind, payload) VALUES ('ledger', '{}') "
                           "RETURNING id").fetchone()
        assert row is not None
        latency = wait_for(lambda: started_after(conn, row[0]), timeout=5, what="the job")
        assert latency < 1.0
    finally:
        stop_loop(proc)


def test_without_notify_the_poll_interval_finds_the_job(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    proc = spawn({**awc_env, "AWC_WORKER_POLL_INTERVAL_MS": "2000"}, "loop")
    try:
        conn.execute("ALTER TABLE awc.jobs DISABLE TRIGGER jobs_notify")
        time.sleep(2.5)  # the loop is idle and waiting
        job_id = enqueue(conn, "ledger")
        latency = wait_for(lambda: started_after(conn, job_id), timeout=10, what="the job")
        assert latency <= 2.0 + 0.5
    finally:
        stop_loop(proc)


def test_sigterm_lets_a_short_job_finish(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "sleep", {"seconds": 1})
    proc = spawn({**awc_env, "AWC_STOP_GRACE_SECS": "5"}, "loop")
    wait_for(lambda: started_after(conn, job_id) is not None, what="the job to start")
    stop_loop(proc)
    assert job_row(conn, job_id)["state"] == "COMPLETED"


def test_sigterm_releases_a_job_past_the_grace_and_the_next_loop_runs_it_once(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "sleep", {"seconds": 3})
    env = {**awc_env, "AWC_STOP_GRACE_SECS": "1"}
    proc = spawn(env, "loop")
    wait_for(lambda: started_after(conn, job_id) is not None, what="the job to start")
    began = time.monotonic()
    stop_loop(proc)
    assert time.monotonic() - began < 1 + 5
    job = job_row(conn, job_id)
    assert (job["state"], job["attempts"]) == ("PENDING", 0)  # released, attempt refunded
    conn.execute("UPDATE awc.jobs SET payload = '{\"seconds\": 0}'")
    second = spawn(env, "loop")
    wait_for(lambda: job_row(conn, job_id)["state"] == "COMPLETED", what="the rerun")
    stop_loop(second)
    assert job_row(conn, job_id)["attempts"] == 1
    runs = conn.execute("SELECT count(*) FROM test_ledger").fetchone()
    assert runs == (2,)  # the abandoned run and exactly one more


def test_database_outage_is_survived_and_counted(tmp_path: Path) -> None:
    from tick.embedded import EmbeddedPostgres
    from tick.migrate import migrate

    server = EmbeddedPostgres(Path(tempfile.mkdtemp(prefix="awc-outage-")) / "data", keep=False)
    url = server.start()
    port = free_port()
    try:
        with connect(url) as conn:
            migrate(conn)
            conn.execute(LEDGER_DDL)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWC_")}
        env.update(DATABASE_URL=url, AWC_CAS_URL="memory://", AWC_HANDLER_MODULES="tests.kinds",
                   PYTHONPATH=str(ROOT), AWC_METRICS_PORT=str(port),
                   AWC_WORKER_POLL_INTERVAL_MS="500", AWC_MAINTENANCE_INTERVAL_SECS="1")
        proc = spawn(env, "loop")
        wait_for(lambda: http_up(f"http://127.0.0.1:{port}/readyz"), what="readiness")
        server.pause()
        time.sleep(4)
        assert proc.poll() is None, "the loop exited during the outage"
        server.resume()
        with connect(url) as conn:
            ids = enqueue_many(conn, [{"kind": "ledger"}] * 20)
            wait_for(lambda: conn.execute(
                "SELECT count(*) FROM awc.jobs WHERE state = 'COMPLETED'").fetchone() == (20,),
                timeout=30, what="jobs enqueued after the restart")
            assert sorted(r[0] for r in conn.execute(
                "SELECT job_id FROM test_ledger").fetchall()) == sorted(ids)
        status, metrics = http_get(f"http://127.0.0.1:{port}/metrics")
        errors = [ln for ln in metrics.splitlines() if ln.startswith("awc_api_errors_total")]
        assert status == 200 and errors
        assert sum(float(ln.rsplit(" ", 1)[1]) for ln in errors) >= 1
        # Ready again once maintenance has had a pass since (its failed
        # passes during the outage are in /readyz until then).
        wait_for(lambda: http_get(f"http://127.0.0.1:{port}/readyz")[0] == 200, timeout=20,
                 what="ready after the outage")
        stop_loop(proc)
    finally:
        server.stop()


def test_metrics_endpoint_after_a_mixed_run(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    port = free_port()
    enqueue_many(conn, [{"kind": "ledger"}] * 3 + [{"kind": "fail"}, {"kind": "boom"}])
    proc = spawn({**awc_env, "AWC_METRICS_PORT": str(port)}, "loop")
    try:
        # Their outcomes are counted once their flush commits, after the claim
        # that spent their attempts: wait for the counts themselves, or a
        # flush of unknown kinds below can take the label sets first.
        known = ('awc_background_jobs_total{kind="ledger",outcome="completed"} 3.0',
                 'awc_background_jobs_total{kind="fail",outcome="failed"} 1.0',
                 'awc_background_jobs_total{kind="boom",outcome="retried"} 1.0')
        wait_for(lambda: http_up(f"http://127.0.0.1:{port}/metrics") and all(
            line in http_get(f"http://127.0.0.1:{port}/metrics")[1] for line in known),
            what="the known kinds' outcomes to be counted")
        # Then 200 kinds nobody handles: more label sets than an instrument keeps.
        enqueue_many(conn, [{"kind": f"unknown-{n}"} for n in range(200)])
        wait_for(lambda: conn.execute("SELECT count(*) FROM awc.jobs WHERE attempts > 0"
                                      ).fetchone() == (205,), what="every job to run")
        wait_for(lambda: http_up(f"http://127.0.0.1:{port}/metrics") and
                 "awc_tick_last_success_timestamp_seconds{driver=\"loop\"}"
                 in http_get(f"http://127.0.0.1:{port}/metrics")[1], what="a reported tick")
        status, text = http_get(f"http://127.0.0.1:{port}/metrics")
    finally:
        stop_loop(proc)
    assert status == 200
    samples = {ln.rsplit(" ", 1)[0]: float(ln.rsplit(" ", 1)[1])
               for ln in text.splitlines() if ln and not ln.startswith("#")}
    assert samples['awc_background_jobs_total{kind="ledger",outcome="completed"}'] == 3
    assert samples['awc_background_jobs_total{kind="fail",outcome="failed"}'] == 1
    assert samples['awc_background_jobs_total{kind="boom",outcome="retried"}'] == 1
    overflow = samples['awc_background_jobs_total{kind="cardinality_overflow",'
                       'outcome="cardinality_overflow"}']
    kinds = {ln.split('kind="')[1].split('"')[0] for ln in samples
             if ln.startswith("awc_background_jobs_total")}
    assert len(kinds) <= 128 and overflow >= 200 - 128
    assert "# TYPE awc_queue_ready_jobs gauge" in text  # sampled by the maintenance part
    for name in ("awc_background_job_lag_seconds", "awc_job_duration_seconds_bucket",
                 "awc_job_wait_seconds_bucket", "awc_tick_duration_seconds_bucket",
                 "awc_tick_last_success_timestamp_seconds"):
        assert any(s.startswith(name) for s in samples), name
    assert any(s.startswith('awc_tick_duration_seconds_count{driver="loop"}') for s in samples)
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool (Debian package prometheus) is not installed; .ci/run installs it")
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                             text=True, timeout=30)
    assert checked.returncode == 0, checked.stdout + checked.stderr



def test_maintenance_run_rescues_and_prunes_but_never_claims(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    expired = enqueue(conn, "noop")
    conn.execute("UPDATE awc.jobs SET state = 'RUNNING', attempts = 1, "
                 "claim_token = gen_random_uuid(), locked_until = now() - interval '1 minute' "
                 "WHERE id = %s", (expired,))
    old = enqueue(conn, "noop")
    conn.execute("UPDATE awc.jobs SET state = 'COMPLETED', finished_at = now() - "
                 "interval '30 days' WHERE id = %s", (old,))
    ready = enqueue(conn, "noop")
    proc = spawn({**awc_env, "AWC_MAINTENANCE_INTERVAL_SECS": "1"}, "maintenance", "run")
    try:
        wait_for(lambda: job_row(conn, expired)["state"] == "PENDING", what="the rescue")
        wait_for(lambda: conn.execute("SELECT count(*) FROM awc.jobs WHERE id = %s",
                                      (old,)).fetchone() == (0,), what="the prune")
        time.sleep(1.5)
        assert job_row(conn, ready)["attempts"] == 0  # never claimed
        assert job_row(conn, expired)["attempts"] == 1
    finally:
        stop_loop(proc)


def test_two_maintenance_processes_never_prune_at_once(
    db_url: str, conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    old = enqueue(conn, "noop")
    conn.execute("UPDATE awc.jobs SET state = 'COMPLETED', finished_at = now() - "
                 "interval '30 days' WHERE id = %s", (old,))
    with connect(db_url) as holder, holder.transaction():
        # Another process is pruning: it holds the prune lock.
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (PRUNE_LOCK_KEY,))
        blocked = run_awc(awc_env, "maintenance", "tick", "--json")
        assert blocked.returncode == 0, blocked.stderr
        assert json.loads(blocked.stdout)["pruned"] == 0
    done = run_awc(awc_env, "maintenance", "tick", "--json")
    assert json.loads(done.stdout)["pruned"] == 1
    again = run_awc(awc_env, "maintenance", "tick", "--json")
    assert json.loads(again.stdout)["pruned"] == 0  # at most once an hour


@pytest.mark.timeout(120)
def test_a_statement_the_server_refuses_is_retried_with_backoff_and_the_loop_recovers(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    """SPEC §4.2, §7.2: a statement the server refuses is never taken for a
    lost connection nor sent again back to back: the tick runner runs again
    after a backoff, /readyz answers 503 naming the refusal meanwhile, and
    once the database takes claims again the loop works. Five refusals in a
    row made the runner dead for good: a failover's read-only first seconds
    idled the loop until someone restarted it (/healthz said 200)."""
    refuse_claims(conn)
    job = enqueue(conn, "noop")
    port = free_port()
    proc = spawn({**awc_env, "AWC_METRICS_PORT": str(port)}, "loop")
    try:
        def readyz() -> tuple[int, dict[str, Any]] | None:
            try:
                code, body = http_get(f"http://127.0.0.1:{port}/readyz")
            except urllib.error.URLError:
                return None  # not listening yet
            return code, json.loads(body)

        unready = wait_for(lambda: (found := readyz()) and found[0] == 503 and found[1],
                           timeout=60, interval=0.2, what="/readyz to name the refusal")
        assert "dead" not in unready
        assert any("claims are refused here" in why for why in unready["database"]), unready
        def refused_runs() -> float:
            _, text = http_get(f"http://127.0.0.1:{port}/metrics")
            return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                       if line.startswith('awc_api_errors_total{component="database"}'))

        # Past five refusals: dead before, still trying now.
        wait_for(lambda: refused_runs() >= 6, timeout=60, interval=0.5,
                 what="six refused runs")
        conn.execute("DROP TRIGGER refuse_claims ON awc.jobs")
        wait_for(lambda: job_row(conn, job)["state"] == "COMPLETED", timeout=30,
                 what="the job to run once claims are taken")
        wait_for(lambda: (found := readyz()) and found[0] == 200, timeout=20,
                 what="/readyz to answer 200 again")
    finally:
        _, err = stop_loop(proc)
    events = [json.loads(line) for line in err.splitlines()]
    assert not [e for e in events if e["event"] in ("database_reconnected", "part_crashed",
                                                    "part_dead")]
    failed = [e for e in events if e["event"] == "tick_failed"]
    assert len(failed) >= 6 and all("claims are refused here" in e["error"] for e in failed)
    assert [e["attempt"] for e in failed] == list(range(1, len(failed) + 1))


@pytest.mark.timeout(120)
def test_the_loop_works_again_after_a_failovers_read_only_window(
    db_url: str, server_url: str, conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    """A failover's first seconds: the database read-only for new sessions
    (`default_transaction_read_only`, set on it), awc's connections ended.
    The loop reconnects into a read-only session and every claim is
    refused; once the setting is reset the loop takes work again. The tick
    runner kept its read-only session and was refused for as long as it
    ran: a database's settings reach new sessions only."""
    name = psycopg.conninfo.conninfo_to_dict(db_url)["dbname"]
    port = free_port()
    proc = spawn({**awc_env, "AWC_METRICS_PORT": str(port),
                  "AWC_WORKER_POLL_INTERVAL_MS": "200"}, "loop")
    ours = ("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND application_name LIKE 'awc%%' AND pid <> %s")
    try:
        def readyz() -> int | None:
            try:
                return http_get(f"http://127.0.0.1:{port}/readyz")[0]
            except urllib.error.URLError:
                return None

        def refused() -> bool:
            code, body = http_get(f"http://127.0.0.1:{port}/readyz")
            return code == 503 and "ReadOnlySqlTransaction" in body

        wait_for(lambda: readyz() == 200, timeout=30, what="the loop to be ready")
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
            admin.execute(ours, (name, conn.info.backend_pid))  # the loop's, not the test's
            wait_for(refused, timeout=30, what="/readyz to name the refused claims")
            admin.execute(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')
        job = enqueue(conn, "noop")
        wait_for(lambda: job_row(conn, job)["state"] == "COMPLETED", timeout=40,
                 what="the loop to take work again")
        wait_for(lambda: readyz() == 200, timeout=20, what="/readyz to answer 200 again")
    finally:
        _, err = stop_loop(proc)
    assert "ReadOnlySqlTransaction" in err and "Traceback" not in err


def test_a_stream_nobody_reads_stops_no_job_and_no_stop(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    """stderr a pipe nobody reads (a stalled log collector): the tick
    runner blocked in a write once the pipe was full; no job ran while the
    health endpoints said 200, and a SIGTERM left its claimed jobs RUNNING
    with an attempt spent. Lines wait for a writer thread of their own now,
    and past its queue are dropped."""
    reader, writer = os.pipe()  # the read end is held, never read
    try:
        env = {**awc_env, "AWC_STOP_GRACE_SECS": "2", "AWC_WORKER_CONCURRENCY": "8"}
        proc = subprocess.Popen(awc_command("loop"), env=env, cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=writer)
        os.close(writer)
        ids = enqueue_many(conn, [{"kind": "noop"} for _ in range(3000)])
        wait_for(lambda: conn.execute("SELECT count(*) FROM awc.jobs WHERE state = 'COMPLETED' "
                                      "AND id = ANY(%s)", (ids,)).fetchone() == (3000,),
                 timeout=60, what="every job to complete with stderr full")
        enqueue_many(conn, [{"kind": "patient", "payload": {"seconds": 60}}] * 2)
        wait_for(lambda: conn.execute("SELECT count(*) FROM awc.jobs WHERE state = 'RUNNING'"
                                      ).fetchone() == (2,), what="the patient jobs to start")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        rows = conn.execute("SELECT state, attempts FROM awc.jobs WHERE kind = 'patient'"
                            ).fetchall()
        assert rows == [("PENDING", 0), ("PENDING", 0)]  # released, their attempt refunded
    finally:
        os.close(reader)
