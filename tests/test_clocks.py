"""SPEC §15, §16: every time decision is on the database's clock, whatever
the host's says. Each test runs real `awc` processes whose wall clock is ten
minutes behind the database's (tests/skewed_clock: the host's NTP is off),
against the real database, and checks what they wrote with the database's
own `now()`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from tests.support import ROOT, run_awc, spawn, wait_for
from tick.producer import enqueue

BEHIND_SECS = 600


def behind(env: dict[str, str]) -> dict[str, str]:
    """`env` for an awc process on a host whose clock is BEHIND_SECS slow."""
    shim = str(ROOT / "tests" / "skewed_clock")
    return {**env, "TEST_HOST_CLOCK_SKEW_SECS": str(-BEHIND_SECS),
            "PYTHONPATH": f"{shim}:{env.get('PYTHONPATH', '')}"}


def test_the_shim_puts_the_host_behind_the_database(awc_env: dict[str, str]) -> None:
    said = subprocess.run([sys.executable, "-c", "import time; print(time.time())"],
                          env=behind(awc_env), capture_output=True, text=True, check=True)
    assert abs(float(said.stdout) - (time.time() - BEHIND_SECS)) < 30
    shown = run_awc(behind(awc_env), "status")
    assert shown.returncode == 0 and not shown.stderr  # awc runs under it, warning-free


def test_a_new_schedule_starts_from_the_database_now(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], tmp_path: Path
) -> None:
    """A schedule added (or synced) on a slow host never fires for times
    before it existed."""
    added = run_awc(behind(awc_env), "schedules", "add", "added", "--cron", "* * * * *",
                    "--kind", "noop")
    assert added.returncode == 0, added.stderr
    declared = tmp_path / "schedules.toml"
    declared.write_text('[schedules.synced]\ncron = "* * * * *"\nkind = "noop"\n')
    synced = run_awc(behind(awc_env), "schedules", "sync", str(declared))
    assert synced.returncode == 0, synced.stderr
    starts = conn.execute("SELECT name, next_fire_at > created_at FROM awc.schedules "
                          "ORDER BY name").fetchall()
    assert starts == [("added", True), ("synced", True)]
    ticked = run_awc(behind(awc_env), "tick", "--max-secs", "10")
    assert ticked.returncode == 0, ticked.stderr
    early = conn.execute("SELECT count(*) FROM awc.schedule_fires AS f JOIN awc.schedules AS s "
                         "ON s.name = f.schedule WHERE f.fire_at < s.created_at").fetchone()
    assert early == (0,)


def test_resume_on_a_slow_host_does_not_catch_up_paused_fires(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    assert run_awc(awc_env, "schedules", "add", "s", "--cron", "* * * * *",
                   "--kind", "noop").returncode == 0
    assert run_awc(awc_env, "schedules", "pause", "s").returncode == 0
    resumed = run_awc(behind(awc_env), "schedules", "resume", "s")
    assert resumed.returncode == 0, resumed.stderr
    row = conn.execute("SELECT next_fire_at > now() FROM awc.schedules").fetchone()
    assert row == (True,)  # the next fire after now, on the database's clock


def test_a_running_tick_on_a_slow_host_is_not_shown_died(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    """Its deadline is the database's now plus the time it has left."""
    job = enqueue(conn, "patient", {"seconds": 60})
    proc = spawn(behind(awc_env), "tick", "--max-secs", "30")
    try:
        wait_for(lambda: conn.execute("SELECT state FROM awc.jobs WHERE id = %s", (job,))
                 .fetchone() == ("RUNNING",), timeout=30, what="the job running")
        listed = run_awc(awc_env, "ticks", "--json")
        assert listed.returncode == 0, listed.stderr
        (row,) = json.loads(listed.stdout)
        assert row["finished_at"] is None and row["died"] is False
        left = conn.execute("SELECT extract(epoch FROM deadline_at - now()) FROM awc.ticks"
                            ).fetchone()
        assert left is not None and 0 < left[0] <= 30
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)


def test_a_loop_stretch_on_a_slow_host_starts_when_it_started(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    proc = spawn(behind(awc_env), "loop")
    try:
        enqueue(conn, "noop")
        wait_for(lambda: conn.execute("SELECT 1 FROM awc.ticks WHERE driver = 'loop' "
                                      "AND claimed = 1").fetchone(),
                 timeout=30, what="the busy stretch's row")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    took = conn.execute("SELECT extract(epoch FROM finished_at - started_at) FROM awc.ticks "
                        "WHERE driver = 'loop' AND claimed = 1").fetchone()
    assert took is not None and 0 <= took[0] < 30


def test_a_delayed_job_runs_after_its_delay_on_the_database_clock(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    made = run_awc(behind(awc_env), "enqueue", "noop", "--delay", "60")
    assert made.returncode == 0, made.stderr
    delay = conn.execute("SELECT extract(epoch FROM run_at - created_at) FROM awc.jobs "
                         "WHERE id = %s", (int(made.stdout),)).fetchone()
    assert delay is not None and 55 <= delay[0] <= 65


def test_a_gc_sweep_on_a_host_ahead_keeps_objects_inside_the_grace(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], tmp_path: Path
) -> None:
    """GC's grace was cut on the worker's clock: a host two hours ahead
    deleted an object written a moment before (grace one hour) that no
    upload protocol protected. The cutoff is the database's `now()`."""
    from datetime import UTC, datetime, timedelta

    from tick.handlers.producer import ensure_tenant
    from tick.handlers.stores import open_store

    store = open_store(f"file://{tmp_path}/store")
    ensure_tenant(conn, "acme")
    fresh = store.put("acme", b"written a moment ago, not yet registered")
    old = store.put("acme", b"garbage of last week")
    store.set_modified("acme", old, datetime.now(UTC) - timedelta(days=7))
    enqueue(conn, "gc_sweep", {"tenant_id": "acme"})
    ahead = {**awc_env, "TEST_HOST_CLOCK_SKEW_SECS": "7200",
             "PYTHONPATH": f"{ROOT / 'tests' / 'skewed_clock'}:{awc_env.get('PYTHONPATH', '')}",
             "AWC_CAS_URL": f"file://{tmp_path}/store", "AWC_GC_GRACE_SECS": "3600"}
    ticked = run_awc(ahead, "tick", "--max-secs", "20")
    assert ticked.returncode == 0, ticked.stderr
    assert conn.execute("SELECT state, deleted FROM awc.gc_epochs").fetchone() == (
        "COMPLETED", 1)
    assert store.head("acme", fresh) is not None
    assert store.head("acme", old) is None
