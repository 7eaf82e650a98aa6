"""SPEC §7.1, §12: `awc tick` as real processes — raced, killed, signalled.

Every test checks the reliability promises from the database afterwards: no
job lost, one outcome per claim, side effects counted in `test_ledger`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support import ROOT, job_row, run_awc, spawn, wait_for, with_module
from tick.producer import enqueue, enqueue_many


def ledger(conn: psycopg.Connection[Any]) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in conn.execute(
        "SELECT job_id, attempt FROM test_ledger ORDER BY job_id, attempt").fetchall()]


def test_four_tick_processes_complete_every_job_exactly_once(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    ids = enqueue_many(conn, [{"kind": "ledger"} for _ in range(2000)])
    env = {**awc_env, "AWC_TICK_MAX_JOBS": "5000", "AWC_WORKER_CONCURRENCY": "4"}
    procs = [spawn({**env, "AWC_WORKER_ID": f"racer{n}"}, "tick", "--json") for n in range(4)]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]
        reports.append(json.loads(out))
    assert sum(r["completed"] for r in reports) == 2000
    assert sum(r["discarded"] for r in reports) == 0
    states = conn.execute(
        "SELECT state, attempts, count(*) FROM awc.jobs GROUP BY 1, 2").fetchall()
    assert states == [("COMPLETED", 1, 2000)]
    # The side effect happened once per job: no job ran twice.
    assert ledger(conn) == [(i, 1) for i in sorted(ids)]
    runners = conn.execute(
        "SELECT count(DISTINCT pid) FROM test_ledger").fetchone()
    assert runners is not None and runners[0] >= 2  # the work was really shared


def test_kill_9_mid_job_is_rescued_and_completed_by_the_next_tick(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "sleep", {"seconds": 30})
    env = {**awc_env, "AWC_WORKER_LEASE_SECS": "2"}
    proc = spawn(env, "tick")
    wait_for(lambda: ledger(conn), what="the job to start")
    proc.kill()
    proc.wait(10)
    assert job_row(conn, job_id)["state"] == "RUNNING"
    wait_for(lambda: conn.execute(
        "SELECT locked_until < now() FROM awc.jobs WHERE id = %s", (job_id,)).fetchone() == (True,),
        what="the lease to expire")
    conn.execute("UPDATE awc.jobs SET payload = '{\"seconds\": 0}' WHERE id = %s", (job_id,))
    done = run_awc(awc_env, "tick", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["rescued"], report["completed"]) == (1, 1)
    job = job_row(conn, job_id)
    assert (job["state"], job["attempts"]) == ("COMPLETED", 2)


def test_a_job_that_kills_its_worker_every_time_ends_failed(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "kill_worker", max_attempts=3)
    env = {**awc_env, "AWC_WORKER_LEASE_SECS": "1"}
    for attempt in range(1, 4):
        proc = run_awc(env, "tick")
        assert proc.returncode == -signal.SIGKILL
        assert job_row(conn, job_id)["attempts"] == attempt
        wait_for(lambda: conn.execute(
            "SELECT locked_until < now() FROM awc.jobs WHERE id = %s",
            (job_id,)).fetchone() == (True,), what="the lease to expire")
    final = run_awc(env, "tick", "--json")
    assert final.returncode == 0, final.stderr
    assert json.loads(final.stdout)["rescued"] == 1
    job = job_row(conn, job_id)
    assert (job["state"], job["attempts"]) == ("FAILED", 3)
    assert job["last_error"].startswith("LeaseExpired:")
    assert len(ledger(conn)) == 3  # no poison loop: three runs, then dead-lettered


def test_sigterm_finishes_running_jobs_and_releases_the_rest(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    finishing = enqueue(conn, "sleep", {"seconds": 1.5}, priority=3)
    cooperative = enqueue(conn, "patient", {"seconds": 60}, priority=2)
    stubborn = enqueue(conn, "sleep", {"seconds": 60}, priority=1)
    never = enqueue(conn, "noop", priority=0)
    env = {**awc_env, "AWC_WORKER_CONCURRENCY": "3", "AWC_STOP_GRACE_SECS": "3"}
    proc = spawn(env, "tick", "--json")
    wait_for(lambda: len(ledger(conn)) == 3, what="three jobs to start")
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert time.monotonic() - signalled < 3 + 2
    report = json.loads(out)
    assert report["stop_reason"] == "stopped"
    assert (report["completed"], report["released"]) == (1, 2)
    assert job_row(conn, finishing)["state"] == "COMPLETED"
    for job_id in (cooperative, stubborn):
        job = job_row(conn, job_id)
        assert (job["state"], job["attempts"]) == ("PENDING", 0), job
    assert (job_row(conn, never)["state"], job_row(conn, never)["attempts"]) == ("PENDING", 0)


def running_a_patient_job(conn: psycopg.Connection[Any], awc_env: dict[str, str],
                          command: list[str]) -> tuple[subprocess.Popen[str], int]:
    """`awc COMMAND` started with one job that stops when cancelled, once
    the job runs: the process and the job."""
    env = {**awc_env, "AWC_STOP_GRACE_SECS": "2", "AWC_WORKER_POLL_INTERVAL_MS": "100"}
    conn.execute("DELETE FROM awc.jobs")
    job = enqueue(conn, "patient", {"seconds": 60})
    proc = spawn(env, *command)
    wait_for(lambda: job_row(conn, job)["state"] == "RUNNING", what="the job to start")
    return proc, job


def test_a_burst_of_sigterms_stops_a_tick_and_a_loop_as_one_does(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    """`timeout` signals a process and then its group; a second SIGTERM
    handled inside the first one's `Event.set` waited on the lock its own
    frame held: about one run in three hung for good (its job left
    RUNNING). Five rounds of each driver, 300 signals each."""
    for command in (["loop"], ["tick", "--max-secs", "60"]) * 5:
        proc, job = running_a_patient_job(conn, awc_env, command)
        for _ in range(300):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=20)
        except Exception:
            proc.kill()
            proc.communicate()
            raise AssertionError(f"awc {command[0]} hung after a burst of SIGTERMs") from None
        assert proc.returncode == 0, err[-2000:]
        assert job_row(conn, job)["state"] == "PENDING"  # released, not left RUNNING


def test_sigterms_until_the_process_is_gone_leave_its_clean_exit(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    """A stop's outcome is decided once the job is released: SIGTERMs that
    keep coming while the process exits (the tail of a burst, a supervisor
    that repeats itself) do not turn its exit 0 into death by the signal.
    Python's finalization puts the default action back on a signal it
    handles, and a late SIGTERM killed a process that had released its job
    and said so (exit -15)."""
    for command in (["loop"], ["tick", "--max-secs", "60"]) * 3:
        proc, job = running_a_patient_job(conn, awc_env, command)
        # Signalled until it has exited, as a zombie not yet reaped (so its
        # pid cannot have gone to another process).
        exited = os.WEXITED | os.WNOHANG | os.WNOWAIT
        deadline = time.monotonic() + 20
        while os.waitid(os.P_PID, proc.pid, exited) is None:
            if time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"awc {command[0]} did not exit under SIGTERMs")
            os.kill(proc.pid, signal.SIGTERM)
            time.sleep(0.0005)
        _, err = proc.communicate()
        assert proc.returncode == 0, err[-2000:]
        assert "Traceback" not in err
        assert job_row(conn, job)["state"] == "PENDING"


def test_on_sigterm_a_handler_tells_a_stop_from_a_cancel(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    # SPEC §6.1, §7.1: a stop sets `cancelled` at once; a handler that checks
    # with finish_on_stop finishes within the grace, one that lets
    # JobCancelled propagate is handed back at once, one that does not look
    # finishes or is released when the grace ends; no attempt is spent.
    finishing = enqueue(conn, "finisher", {"units": 8, "unit_secs": 0.25}, priority=4)
    too_long = enqueue(conn, "finisher", {"units": 400, "unit_secs": 0.25}, priority=3)
    handing_back = enqueue(conn, "hands_back", {"units": 400, "unit_secs": 0.25}, priority=2)
    sleeper = enqueue(conn, "sleep", {"seconds": 1.0}, priority=1)
    env = {**awc_env, "AWC_WORKER_CONCURRENCY": "4", "AWC_STOP_GRACE_SECS": "3"}
    proc = spawn(env, "tick", "--json")
    wait_for(lambda: len(ledger(conn)) == 4, what="four jobs to start")
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    elapsed = time.monotonic() - signalled
    assert proc.returncode == 0, err
    assert 3 <= elapsed < 3 + 2  # the grace, and no more
    report = json.loads(out)
    assert (report["completed"], report["released"]) == (2, 2)
    done = job_row(conn, finishing)
    assert done["state"] == "COMPLETED"
    assert done["result"]["stopping"] is True and done["result"]["cancelled"] is True
    assert 0 < done["result"]["remaining"] <= 3  # its deadline became the grace's end
    assert job_row(conn, sleeper)["state"] == "COMPLETED"
    for job_id in (too_long, handing_back):
        job = job_row(conn, job_id)
        assert (job["state"], job["attempts"]) == ("PENDING", 0), job
    released_at = conn.execute("SELECT extract(epoch FROM updated_at - started_at) FROM awc.jobs "
                               "WHERE id = %s", (handing_back,)).fetchone()[0]
    assert released_at is None or float(released_at) < 2.5  # handed back at once


def test_a_plain_sql_insert_is_picked_up_by_the_next_tick(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    conn.execute("INSERT INTO awc.jobs (kind, payload) VALUES ('ledger', '{}')")
    done = run_awc(awc_env, "tick", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["completed"] == 1


def test_events_are_one_json_line_per_job_without_payload_or_error(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    enqueue(conn, "ledger", {"secret": "p4yl0ad-value"})
    enqueue(conn, "boom")
    done = run_awc(awc_env, "tick")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert sorted(e["outcome"] for e in events) == ["completed", "retried"]
    for event in events:
        assert set(event) == {"ts", "level", "event", "job_id", "kind", "outcome", "state",
                              "attempts", "duration_ms"}
        assert event["event"] == f"job_{event['job_id']}"  # SPEC §9: the id also as a number
    levels = {e["outcome"]: e["level"] for e in events}
    assert levels == {"completed": "info", "retried": "warning"}
    assert "p4yl0ad-value" not in done.stderr and "exploded" not in done.stderr


def test_operator_retry_revives_a_dead_letter(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "fail", max_attempts=1)
    assert run_awc(awc_env, "tick").returncode == 0
    assert job_row(conn, job_id)["state"] == "FAILED"
    revived = run_awc(awc_env, "retry", str(job_id))
    assert revived.returncode == 0, revived.stderr
    job = job_row(conn, job_id)
    assert (job["state"], job["attempts"]) == ("PENDING", 0)
    again = run_awc(awc_env, "retry", str(job_id))
    assert again.returncode == 1
    assert again.stderr.strip() == (
        f"awc: job {job_id} is PENDING; only FAILED or CANCELLED jobs can be retried")


def test_operator_retry_of_a_job_whose_dedupe_key_is_live_says_so(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    old = enqueue(conn, "noop", dedupe_key="nightly-2026-12-01")
    conn.execute("UPDATE awc.jobs SET state = 'FAILED' WHERE id = %s", (old,))
    live = enqueue(conn, "noop", dedupe_key="nightly-2026-12-01")  # the key is free again
    assert live != old
    refused = run_awc(awc_env, "retry", str(old))
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f"awc: job {old} cannot be retried: a live job holds its dedupe key")
    assert job_row(conn, old)["state"] == "FAILED"
    assert job_row(conn, live)["state"] == "PENDING"


def test_operator_cancel_and_missing_jobs(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "noop")
    assert run_awc(awc_env, "cancel", str(job_id)).returncode == 0
    assert job_row(conn, job_id)["state"] == "CANCELLED"
    missing = run_awc(awc_env, "cancel", "987654")
    assert (missing.returncode, missing.stderr.strip()) == (1, "awc: job 987654 does not exist")


def test_enqueue_status_and_jobs_commands(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    made = run_awc(awc_env, "enqueue", "noop", "--payload", '{"a": 1}', "--priority", "2",
                   "--dedupe-key", "k1")
    assert made.returncode == 0, made.stderr
    job_id = int(made.stdout)
    same = run_awc(awc_env, "enqueue", "noop", "--dedupe-key", "k1")
    assert int(same.stdout) == job_id
    later = run_awc(awc_env, "enqueue", "noop", "--delay", "3600")
    assert later.returncode == 0
    status = run_awc(awc_env, "status", "--json")
    data = json.loads(status.stdout)
    assert data["by_state"] == {"PENDING": 2} and data["by_kind"] == {"noop": {"PENDING": 2}}
    assert data["dead_letters"] == 0 and data["oldest_ready_age_s"] is not None
    shown = json.loads(run_awc(awc_env, "jobs", "show", str(job_id)).stdout)
    assert shown["payload"] == {"a": 1} and shown["priority"] == 2
    listed = run_awc(awc_env, "jobs", "list", "--state", "PENDING")
    assert listed.returncode == 0 and str(job_id) in listed.stdout


def test_usage_errors_exit_2(awc_env: dict[str, str]) -> None:
    for args in (["enqueue", "k", "--payload", "{not json"], ["tick", "--bogus"],
                 ["enqueue", "k", "--delay", "1", "--run-at", "2030-01-01T00:00:00"]):
        done = run_awc(awc_env, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert "Traceback" not in done.stderr


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWC_") and k != "DATABASE_URL"}
    env.update(PYTHONPATH=str(ROOT), **extra)
    return env


def test_missing_database_url_is_one_clear_line() -> None:
    done = run_awc(_clean_env(AWC_CAS_URL="memory://"), "tick")
    assert done.returncode == 1
    assert done.stderr == "awc: DATABASE_URL is required but not set\n"


def test_unparsable_integer_setting_is_one_clear_line() -> None:
    done = run_awc(_clean_env(DATABASE_URL="postgresql://x@127.0.0.1/x",
                              AWC_TICK_MAX_JOBS="lots"), "status")
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("awc: invalid setting AWC_TICK_MAX_JOBS:")


def test_unreachable_database_never_prints_its_password() -> None:
    password = "Sup3r-S3cret-pw"
    url = f"postgresql://awc:{password}@127.0.0.1:1/awc"
    for args in (["tick"], ["status"], ["migrate"]):
        done = run_awc(_clean_env(DATABASE_URL=url, AWC_CAS_URL="memory://"), *args)
        assert done.returncode == 1
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("awc: cannot connect to 127.0.0.1:1/awc")
        assert password not in done.stderr + done.stdout


def test_a_bad_handler_module_is_a_startup_error(awc_env: dict[str, str]) -> None:
    done = run_awc({**awc_env, "AWC_HANDLER_MODULES": "tests.kinds,no_such_module_xyz"}, "tick")
    assert done.returncode == 1
    assert done.stderr.startswith("awc: AWC_HANDLER_MODULES: cannot import 'no_such_module_xyz'")



def test_a_handler_module_that_exits_at_import_is_a_startup_error(
    awc_env: dict[str, str], tmp_path: Path
) -> None:
    """`raise SystemExit(0)` in a handler module made `awc tick` exit 0 and
    say nothing (a loop under systemd's Restart=on-failure stopped, cleanly)."""
    env = with_module(awc_env, tmp_path, "exits_at_import", "raise SystemExit(0)\n")
    for command in (["tick"], ["loop"]):
        done = run_awc(env, *command, timeout=30)
        assert done.returncode == 1, (command, done.stderr[-2000:])
        assert done.stderr.startswith(
            "awc: AWC_HANDLER_MODULES: cannot import 'exits_at_import': SystemExit"), done.stderr


def test_a_child_a_handler_forks_that_returns_from_it_ends(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], tmp_path: Path
) -> None:
    """A forked child that returned from the handler (it forgot os._exit)
    waited for ever in its copied slot, deaf to SIGTERM, holding the tick's
    stdout open: `$(awc tick --json)` never returned."""
    env = with_module(awc_env, tmp_path, "forks", (
        "import os, time\n"
        "from tick import Complete, handler\n"
        "@handler('forks')\n"
        "def forks(ctx, payload):\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(1)\n"
        "    return Complete({})\n"))
    job = enqueue(conn, "forks")
    done = run_awc(env, "tick", "--json", timeout=30)  # its output's end: every writer gone
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["completed"] == 1
    assert job_row(conn, job)["state"] == "COMPLETED"

def test_an_unknown_store_scheme_is_a_startup_error(awc_env: dict[str, str]) -> None:
    done = run_awc({**awc_env, "AWC_CAS_URL": "ftp://files.example/x"}, "tick")
    assert done.returncode == 1
    assert done.stderr.startswith("awc: invalid setting AWC_CAS_URL: unknown scheme 'ftp'")


def test_a_missing_store_url_is_a_startup_error(awc_env: dict[str, str]) -> None:
    env = {k: v for k, v in awc_env.items() if k != "AWC_CAS_URL"}
    done = run_awc(env, "tick")
    assert (done.returncode, done.stderr) == (1, "awc: AWC_CAS_URL is required but not set\n")


STRAY_THREAD = (
    "import threading, time\n"
    "from tick import Complete, handler\n"
    "@handler('strays')\n"
    "def strays(ctx, payload):\n"
    "    threading.Thread(target=time.sleep, args=(3600,), daemon=False).start()\n"
    "    return Complete({})\n")


def test_a_thread_a_handler_leaves_running_does_not_keep_awc_alive(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], tmp_path: Path
) -> None:
    """A handler that starts a non-daemon thread and returns: `awc tick`
    printed its report and never exited (the interpreter joins such a
    thread), and `awc loop` stopped by SIGTERM said so and stayed; both were
    deaf to SIGTERM until killed."""
    env = with_module(awc_env, tmp_path, "stray_threads", STRAY_THREAD)
    job = enqueue(conn, "strays")
    done = run_awc(env, "tick", "--json", timeout=30)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["completed"] == 1
    assert job_row(conn, job)["state"] == "COMPLETED"
    looped = enqueue(conn, "strays")
    proc = spawn(env, "loop")
    try:
        wait_for(lambda: job_row(conn, looped)["state"] == "COMPLETED", timeout=30,
                 what="the loop to run the job")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize(("source", "said"), [
    ("async def h(ctx, payload):\n    return 1\n", "is an async function"),
    ("def h(ctx, payload):\n    yield 1\n", "is a generator function"),
])
def test_a_handler_that_is_not_a_plain_function_is_a_startup_error(
    awc_env: dict[str, str], tmp_path: Path, source: str, said: str
) -> None:
    """An `async def` or generator handler registered, and each of its jobs
    failed as "result is not JSON: ... coroutine"; now its module's import
    is refused, naming the kind."""
    env = with_module(awc_env, tmp_path, "not_plain", (
        "from tick import handler\n@handler('odd')\n" + source))
    done = run_awc(env, "tick", timeout=30)
    assert done.returncode == 1
    line = done.stderr.strip()
    assert line.startswith("awc: AWC_HANDLER_MODULES: cannot import 'not_plain'"), line
    assert "'odd' " + said in line and len(line.splitlines()) == 1


def test_a_stray_thread_does_not_hold_a_tick_started_without_stderr(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], tmp_path: Path
) -> None:
    """With stderr closed (`2>&-`) the exit's flush of it raised, and the
    process waited for the handler's thread again."""
    import shlex
    import subprocess

    from tests.support import awc_command

    env = with_module(awc_env, tmp_path, "stray_threads", STRAY_THREAD)
    job = enqueue(conn, "strays")
    done = subprocess.run(["sh", "-c", shlex.join(awc_command("tick", "--json")) + " 2>&-"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and json.loads(done.stdout)["completed"] == 1
    assert job_row(conn, job)["state"] == "COMPLETED"
