"""SPEC §3, §4.2: awc behind a transaction pooler (a real PgBouncer from
Debian's package), and a session whose prepared statements are not its own.
Forgotten, `AWC_DB_PREPARE=false` made a prepared statement "not exist" or
"already exist" now and then, and each time the engine took the refusal for
the outcome's own: no-op jobs were dead-lettered as FAILED, attempts left.
Now such a refusal fails no job: the run connects again without prepared
statements, says why, and goes on."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.silent_proxy import SilentProxy
from tests.support import free_port, registry_with, spawn, stop, wait_for
from tick.db import connect
from tick.producer import enqueue_many

PGBOUNCER = shutil.which("pgbouncer") or next(
    (p for p in ("/usr/sbin/pgbouncer",) if Path(p).exists()), None)


def need_pgbouncer() -> None:
    """Fail in CI, skip elsewhere, when Debian's pgbouncer is missing."""
    message = "needs Debian's pgbouncer (.ci/run installs it)"
    if PGBOUNCER:
        return
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def accepts(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=2) as c:
            c.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


@pytest.fixture
def pooled(server_url: str) -> Iterator[Callable[[str], str]]:
    """PgBouncer in transaction mode, one server connection for every
    client (so their sessions are shared as a busy pooler's are); gives the
    URL of a database through it. PgBouncer will not run as root: as root it
    runs as `nobody`, and reaches the server through a TCP hop of this
    process (the test server may listen on a socket only root can open)."""
    need_pgbouncer()
    assert PGBOUNCER is not None
    hop = SilentProxy(server_url)
    user = str(conninfo_to_dict(server_url).get("user") or "postgres")
    folder = Path(tempfile.mkdtemp(prefix="awc-pooler-"))
    folder.chmod(0o755)
    port = free_port()
    (folder / "users.txt").write_text(f'"{user}" ""\n')
    (folder / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host=127.0.0.1 port={hop.port}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {folder / 'users.txt'}\n"
        "pool_mode = transaction\ndefault_pool_size = 1\nmax_client_conn = 100\n"
        "ignore_startup_parameters = options\n")
    for path in folder.iterdir():
        path.chmod(0o644)
    as_nobody = ["-u", "nobody"] if os.geteuid() == 0 else []
    with open(folder / "pgbouncer.log", "wb") as log:
        proc = subprocess.Popen([PGBOUNCER, *as_nobody, str(folder / "pgbouncer.ini")],
                                stdout=log, stderr=subprocess.STDOUT)

    def through(url: str) -> str:
        parts = {k: v for k, v in conninfo_to_dict(url).items() if k != "hostaddr"}
        return make_conninfo(**{**parts, "host": "127.0.0.1", "port": str(port)})

    try:
        wait_for(lambda: accepts(through(server_url)), timeout=20, what="pgbouncer to accept")
        yield through
    finally:
        stop(proc)
        hop.close()
        shutil.rmtree(folder, ignore_errors=True)


def test_a_forgotten_prepare_setting_behind_a_transaction_pooler_fails_no_job(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], pooled: Callable[[str], str]
) -> None:
    """Three `awc tick` processes through PgBouncer with prepared statements
    on (AWC_DB_PREPARE forgotten): every job completes once, none FAILED, and
    the processes say what to set."""
    ids = enqueue_many(conn, [{"kind": "noop"}] * 1200)
    env = {**awc_env, "DATABASE_URL": pooled(awc_env["DATABASE_URL"]),
           "AWC_DB_PREPARE": "true", "AWC_WORKER_CONCURRENCY": "8"}
    procs = [spawn(env, "tick", "--max-jobs", "400", "--max-secs", "60") for _ in range(3)]
    errs = []
    try:
        for proc in procs:
            _, err = proc.communicate(timeout=120)
            errs.append(err)
            assert proc.returncode == 0, err[-2000:]
    finally:
        for proc in procs:
            stop(proc)
    assert "Traceback" not in "".join(errs)
    rows = conn.execute("SELECT state, attempts, count(*) FROM awc.jobs WHERE id = ANY(%s) "
                        "GROUP BY 1, 2", (ids,)).fetchall()
    assert rows == [("COMPLETED", 1, 1200)], rows
    told = [line for err in errs for line in err.splitlines() if "database_reconnected" in line]
    assert told, "no process met a prepared statement the pooler's session lost"
    assert all("AWC_DB_PREPARE=false" in line for line in told)


def test_behind_a_transaction_pooler_with_prepare_off_the_tick_and_the_loop_work(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], pooled: Callable[[str], str]
) -> None:
    """The documented setting: a tick drains, and the loop (its LISTEN lent
    no session of its own) runs a job enqueued while it waits."""
    env = {**awc_env, "DATABASE_URL": pooled(awc_env["DATABASE_URL"]),
           "AWC_DB_PREPARE": "false", "AWC_WORKER_POLL_INTERVAL_MS": "200"}
    enqueue_many(conn, [{"kind": "noop"}] * 50)
    done = subprocess.run(["awc", "tick", "--max-secs", "60"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "database_reconnected" not in done.stderr
    loop = spawn(env, "loop")
    try:
        wait_for(lambda: conn.execute("SELECT count(*) FROM awc.ticks WHERE driver = 'loop'")
                 .fetchone() is not None and loop.poll() is None, timeout=10,
                 what="the loop to start")
        time.sleep(0.5)  # the loop waits for work: the job arrives while it does
        (job,) = enqueue_many(conn, [{"kind": "noop"}])
        wait_for(lambda: conn.execute("SELECT state FROM awc.jobs WHERE id = %s",
                                      (job,)).fetchone() == ("COMPLETED",),
                 timeout=20, what="the loop to run the job")
    finally:
        stop(loop)
    assert conn.execute("SELECT count(*) FROM awc.jobs WHERE state <> 'COMPLETED'"
                        ).fetchone() == (0,)


def test_a_session_that_lost_its_prepared_statements_fails_no_job(
    db_url: str, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on one connection, deterministic: psycopg's prepared
    statements deallocated behind its back. The next round trip is refused
    ("prepared statement does not exist"); sent apart, each completion was
    refused too and its job dead-lettered. Now the run connects again,
    without prepared statements, and records every completion."""
    import tick.db
    from tick.engine.api import Engine
    from tick.engine.spec import RunSpec

    monkeypatch.setattr(tick.db, "_shared_sessions", False)  # restored after
    engine = Engine(lambda: connect(db_url), registry=registry_with(job=lambda ctx, p: p))
    try:
        enqueue_many(conn, [{"kind": "job", "payload": {"n": n}} for n in range(12)])
        first = engine.run(RunSpec(deadline=time.monotonic() + 30, concurrency=1))
        assert first.completed == 12
        prepared = engine.conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
        assert prepared is not None and prepared[0] > 0  # psycopg prepared the round trip's
        engine.conn.pgconn.exec_(b"DEALLOCATE ALL")  # behind psycopg's back
        ids = enqueue_many(conn, [{"kind": "job", "payload": {"n": n}} for n in range(4)])
        report = engine.run(RunSpec(deadline=time.monotonic() + 30, concurrency=2,
                                    reconnect=True))
    finally:
        engine.close()
    assert (report.completed, report.failed) == (4, 0)
    rows = conn.execute("SELECT state, attempts, result FROM awc.jobs WHERE id = ANY(%s) "
                        "ORDER BY id", (ids,)).fetchall()
    assert rows == [("COMPLETED", 1, {"n": n}) for n in range(4)]
    assert tick.db._shared_sessions  # and every connection after it prepares nothing
