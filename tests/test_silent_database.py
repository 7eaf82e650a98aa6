"""SPEC §3, §6, §7.2, §19: a database that stops answering but keeps its
socket open. A tick keeps its deadline, the loop's /readyz sees the stuck
round trip and recovers with the server, a console page answers 503: every
awc connection's exchanges are bounded (tick.watchdog), none waits forever."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from tests.silent_proxy import SilentProxy
from tests.support import (
    configure_handlers,
    free_port,
    http_get,
    http_up,
    registry_with,
    run_awc,
    signed_in,
    spawn,
    start_console,
    stop,
    wait_for,
)
from tick.db import connect
from tick.producer import enqueue, enqueue_many


@pytest.fixture
def proxy(server_url: str) -> Iterator[SilentProxy]:
    found = SilentProxy(server_url)
    yield found
    found.close()


def through(proxy: SilentProxy, awc_env: dict[str, str]) -> dict[str, str]:
    return {**awc_env, "DATABASE_URL": proxy.url_for(awc_env["DATABASE_URL"])}


def timed_tick(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    began = time.monotonic()
    try:
        done = run_awc(env, "tick", *args, timeout=40)
    except subprocess.TimeoutExpired:
        pytest.fail("awc tick still ran 40 s later: it waits on a silent database forever")
    return done, time.monotonic() - began


def assert_one_line_about_silence(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("awc: ") and ("did not answer" in last or "Timeout" in last), last


def tick_while(conn: psycopg.Connection[Any], env: dict[str, str], max_secs: int,
               meanwhile: Callable[[], None]) -> tuple[subprocess.CompletedProcess[str], float]:
    """`awc tick --max-secs MAX_SECS` on one `sleep` job, `meanwhile` done to
    the proxy once the job runs: the tick's result and how long it took."""
    job = enqueue(conn, "sleep", {"seconds": 1})
    result: list[tuple[subprocess.CompletedProcess[str], float]] = []
    runner = threading.Thread(
        target=lambda: result.append(timed_tick(env, "--max-secs", str(max_secs))))
    runner.start()
    wait_for(lambda: conn.execute("SELECT 1 FROM test_ledger WHERE job_id = %s",
                                  (job,)).fetchone(), timeout=20, what="the job to start")
    meanwhile()
    runner.join(60)
    assert result, "awc tick never returned"
    return result[0]


def test_a_tick_keeps_its_deadline_when_the_database_falls_silent_mid_run(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], proxy: SilentProxy
) -> None:
    # Silent once the job runs: the round trip recording its outcome gets no answer.
    done, elapsed = tick_while(conn, through(proxy, awc_env), 4, proxy.fall_silent)
    assert_one_line_about_silence(done)
    # Its budget, the grace, and the short best-effort record of the failure.
    assert elapsed < 4 + 10, elapsed


def test_a_tick_with_time_to_reconnect_tries_and_still_keeps_its_deadline(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], proxy: SilentProxy
) -> None:
    """A tick whose connection is lost while its deadline leaves time for a
    connect (10 s) connects again; the server then accepts and says nothing,
    so the tick ends by its deadline, with one `awc:` line."""
    before: list[int] = []

    def lost_then_silent() -> None:
        proxy.cut()  # the job's outcome meets a closed connection
        before.append(proxy.accepted)
        proxy.answer()
        proxy.fall_silent()  # and every connection after it, silence

    done, elapsed = tick_while(conn, through(proxy, awc_env), 20, lost_then_silent)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("awc: ")
    # One connection tried again at least, then the failure's own record.
    assert proxy.accepted - before[0] >= 2
    assert elapsed < 20 + 10, elapsed


def test_a_tick_rides_out_a_database_gone_for_a_moment(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], proxy: SilentProxy
) -> None:
    """The server goes away mid-run (its connections closed, new ones
    refused: a failover) and is back two seconds later: the tick connects
    again and records the running job's outcome, exit 0, nothing run twice."""
    job = enqueue(conn, "sleep", {"seconds": 3})
    proc = spawn(through(proxy, awc_env), "tick", "--max-secs", "30")
    try:
        wait_for(lambda: conn.execute("SELECT 1 FROM test_ledger WHERE job_id = %s",
                                      (job,)).fetchone(), timeout=20, what="the job to start")
        proxy.cut()
        time.sleep(2)  # the outage itself, not a synchronisation
        proxy.answer()
        _, err = proc.communicate(timeout=60)
    finally:
        stop(proc)
    assert proc.returncode == 0, err[-2000:]
    assert "database_reconnected" in err and "Traceback" not in err
    row = conn.execute("SELECT state, attempts FROM awc.jobs WHERE id = %s", (job,)).fetchone()
    assert row == ("COMPLETED", 1)
    assert conn.execute("SELECT count(*) FROM test_ledger WHERE job_id = %s",
                        (job,)).fetchone() == (1,)


def test_a_tick_keeps_its_deadline_when_the_database_is_silent_from_the_start(
    awc_env: dict[str, str], proxy: SilentProxy
) -> None:
    proxy.fall_silent()
    done, elapsed = timed_tick(through(proxy, awc_env), "--max-secs", "2")
    assert_one_line_about_silence(done)
    assert elapsed < 2 + 6, elapsed  # not the 10 s connect timeout of a tick with time to spare


def test_the_python_tick_returns_by_its_deadline_against_a_silent_server(
    db_url: str, proxy: SilentProxy
) -> None:
    """The engine's own bound, whatever exchange is stuck (here maintenance,
    the first one): `tick()` raises a lost-connection DatabaseError on time."""
    from tick.engine.api import tick
    from tick.errors import DatabaseError

    with connect(proxy.url_for(db_url)) as silent:
        proxy.fall_silent()
        began = time.monotonic()
        with pytest.raises(DatabaseError) as raised:
            tick(silent, max_secs=2)
        assert time.monotonic() - began < 2 + 3
        assert raised.value.connection_lost
        assert "did not answer" in str(raised.value)


def test_an_operator_command_fails_in_bounded_time_on_a_silent_connection(
    db_url: str, proxy: SilentProxy
) -> None:
    """Every awc connection is bounded, not only a tick's: here a bound of
    1 s on a connection with no deadline."""
    from tick.watchdog import NoAnswer, watch

    with connect(proxy.url_for(db_url)) as silent:
        watch(silent, answer_by=None, limit_secs=1.0)
        proxy.fall_silent()
        began = time.monotonic()
        with pytest.raises(NoAnswer):
            silent.execute("SELECT 1")
        assert time.monotonic() - began < 3
        assert silent.closed  # never reused half way through an exchange


def test_the_loop_is_unready_while_a_round_trip_is_stuck_and_ready_once_answered(
    awc_env: dict[str, str], proxy: SilentProxy
) -> None:
    port = free_port()
    env = {**through(proxy, awc_env), "AWC_METRICS_PORT": str(port),
           "AWC_WORKER_POLL_INTERVAL_MS": "200", "AWC_MAINTENANCE_INTERVAL_SECS": "1"}
    proc = spawn(env, "loop")
    try:
        wait_for(lambda: http_up(f"http://127.0.0.1:{port}/readyz"), timeout=30,
                 what="readiness")
        proxy.fall_silent()
        wait_for(lambda: http_get(f"http://127.0.0.1:{port}/readyz")[0] == 503, timeout=30,
                 interval=0.5, what="/readyz to see the stuck round trip")
        body = json.loads(http_get(f"http://127.0.0.1:{port}/readyz")[1])
        assert any("no answer" in line for line in body["database"]), body
        assert http_get(f"http://127.0.0.1:{port}/healthz")[0] == 200  # alive, not ready
        proxy.answer()
        wait_for(lambda: http_get(f"http://127.0.0.1:{port}/readyz")[0] == 200, timeout=30,
                 interval=0.5, what="readiness once the database answers")
    finally:
        proxy.answer()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]


def test_the_loop_is_unready_while_it_reconnects_to_a_lost_database(
    awc_env: dict[str, str], proxy: SilentProxy
) -> None:
    port = free_port()
    env = {**through(proxy, awc_env), "AWC_METRICS_PORT": str(port),
           "AWC_WORKER_POLL_INTERVAL_MS": "200"}
    proc = spawn(env, "loop")
    try:
        wait_for(lambda: http_up(f"http://127.0.0.1:{port}/readyz"), timeout=30,
                 what="readiness")
        proxy.cut()
        wait_for(lambda: http_get(f"http://127.0.0.1:{port}/readyz")[0] == 503, timeout=20,
                 interval=0.2, what="/readyz to see the lost database")
        body = json.loads(http_get(f"http://127.0.0.1:{port}/readyz")[1])
        assert any("unreachable" in line for line in body["database"]), body
        proxy.answer()
        wait_for(lambda: http_get(f"http://127.0.0.1:{port}/readyz")[0] == 200, timeout=30,
                 interval=0.5, what="readiness once reconnected")
    finally:
        proxy.answer()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]


def test_a_console_page_answers_503_when_the_database_falls_silent(
    awc_env: dict[str, str], proxy: SilentProxy
) -> None:
    proc, base = start_console(through(proxy, awc_env))
    try:
        client = signed_in(base)
        client.timeout = 40
        assert client.get("/jobs").status_code == 200
        proxy.fall_silent()
        began = time.monotonic()
        page = client.get("/jobs")
        assert page.status_code == 503, page.status_code
        assert time.monotonic() - began < 10 + 5
    finally:
        proxy.answer()
        stop(proc)


def test_a_healthy_slow_statement_is_never_taken_for_a_silent_server() -> None:
    """The default bound outlasts the server's own statement timeout: a
    statement that long is cancelled and answered by the server first."""
    from tick.db import STATEMENT_TIMEOUT_MS
    from tick.watchdog import EXCHANGE_LIMIT_SECS, WatchedConnection

    assert EXCHANGE_LIMIT_SECS > STATEMENT_TIMEOUT_MS / 1000
    assert WatchedConnection.limit_secs == EXCHANGE_LIMIT_SECS


def test_the_handlers_connections_are_bounded_too(db_url: str) -> None:
    """A built-in handler's own writes go through watched connections: a
    silent database fails them in bounded time, never holds the slot's
    thread forever; readiness leaves them to the job's deadline."""
    from tick.handlers.runtime import runtime
    from tick.handlers.stores import open_store

    from tick.watchdog import WatchedConnection

    configure_handlers(db_url, open_store("memory://"))
    try:
        with runtime().connection() as handlers_conn:
            assert isinstance(handlers_conn, WatchedConnection)
            assert handlers_conn.purpose == "handlers"
    finally:
        runtime().close()


def test_applying_a_migration_is_never_cut_by_a_ticks_deadline(db_url: str) -> None:
    """Past a tick's deadline an exchange gets a moment, not a hang; but a
    migration file (minutes on a large table) keeps its own bound, or every
    tick would cut it and roll it back again."""
    from tick.watchdog import NoAnswer, migrating, watch

    with connect(db_url) as late:
        watch(late, answer_by=time.monotonic() - 1)
        with pytest.raises(NoAnswer):
            late.execute("SELECT pg_sleep(1)")
    with connect(db_url) as migrating_conn:
        deadline = time.monotonic() - 1
        watch(migrating_conn, answer_by=deadline)
        with migrating(migrating_conn):
            migrating_conn.execute("SELECT pg_sleep(1)")
        assert getattr(migrating_conn, "answer_by", None) == deadline


def _waited(conn: psycopg.Connection[Any], job: int) -> bool:
    row = conn.execute("SELECT waited FROM awc.jobs WHERE id = %s", (job,)).fetchone()
    return bool(row and row[0])


def test_awc_wait_keeps_its_timeout_when_the_database_falls_silent(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], proxy: SilentProxy
) -> None:
    """SPEC §20: `awc wait --timeout 3` returns by then (and the grace)
    with one line about the silence, not when the database answers again:
    it waited until the server came back (a minute, or for ever)."""
    job = enqueue(conn, "noop", {})
    waiter = spawn(through(proxy, awc_env), "wait", str(job), "--timeout", "3")
    try:
        # Listening and marked: the wait is in its poll when the server falls silent.
        wait_for(lambda: _waited(conn, job), timeout=20, what="the wait to mark the job")
        began = time.monotonic()
        proxy.fall_silent()
        try:
            _, stderr = waiter.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("awc wait --timeout 3 still waited 30 s into the silence")
        elapsed = time.monotonic() - began
    finally:
        stop(waiter)
    assert waiter.returncode == 1, stderr[-2000:]
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("awc: ") and "did not answer" in last, last
    assert elapsed < 3 + 2 + 3, elapsed  # its timeout, the grace, a margin


def test_awc_wait_keeps_its_timeout_when_the_database_is_silent_from_the_start(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], proxy: SilentProxy
) -> None:
    """The timeout counts from the command's start: against a database that
    never answers, `awc wait --timeout 1` took libpq's 10 s connect timeout."""
    job = enqueue(conn, "noop", {})
    proxy.fall_silent()
    began = time.monotonic()
    done = run_awc(through(proxy, awc_env), "wait", str(job), "--timeout", "1", timeout=40)
    elapsed = time.monotonic() - began
    assert_one_line_about_silence(done)
    assert elapsed < 1 + 2 + 3, elapsed  # its timeout, libpq's shortest connect timeout, a margin


def test_the_python_wait_keeps_its_deadline_and_its_connections_bounds(
    conn: psycopg.Connection[Any], db_url: str, proxy: SilentProxy
) -> None:
    """`tick.wait` on an awc connection: a silent server ends the wait with
    NoAnswer by its deadline and the grace; the connection's own bounds
    are as they were once the wait returns."""
    from tick.waiting import wait
    from tick.watchdog import NoAnswer

    job = enqueue(conn, "noop", {})
    with connect(proxy.url_for(db_url)) as healthy:
        with pytest.raises(TimeoutError):
            wait(healthy, job, 0.2)
        assert getattr(healthy, "answer_by", "unset") is None  # restored
    with connect(proxy.url_for(db_url)) as silent:
        proxy.fall_silent()
        began = time.monotonic()
        with pytest.raises(NoAnswer):
            wait(silent, job, 1.0)
        assert time.monotonic() - began < 1 + 2 + 2
        assert silent.closed


def test_an_outcome_recorded_before_its_answer_was_lost_is_counted_as_recorded(
    db_url: str, conn: psycopg.Connection[Any], proxy: SilentProxy
) -> None:
    """The server commits a job's completion and the connection drops before
    its answer arrives: the tick connects again and sends the outcome again,
    which the fence refuses (the job is no longer RUNNING). That refusal is
    its own completion, not another holder's: it counted `discarded`, with a
    warning, for a job it completed."""
    from tick.engine.api import Engine
    from tick.engine.spec import RunSpec

    def cutter(ctx: Any, payload: Any) -> dict[str, int]:
        proxy.drop_next_answer()  # the answer to the exchange recording this
        return {"done": 1}

    job = enqueue(conn, "cutter")
    url = proxy.url_for(db_url)
    engine = Engine(lambda: connect(url), registry=registry_with(cutter=cutter))
    try:
        report = engine.run(RunSpec(max_jobs=1, deadline=time.monotonic() + 30,
                                    concurrency=1, reconnect=True))
    finally:
        engine.close()
    assert (report.completed, report.discarded) == (1, 0)
    assert conn.execute("SELECT state, result, attempts FROM awc.jobs WHERE id = %s",
                        (job,)).fetchone() == ("COMPLETED", {"done": 1}, 1)


def test_jobs_a_claim_took_before_its_answer_was_lost_are_released_not_left_to_leases(
    db_url: str, conn: psycopg.Connection[Any], proxy: SilentProxy
) -> None:
    """The exchange recording a job's outcome also claims the next job; the
    server commits both and the answer is lost. The tick never heard of the
    job it claimed: it sat RUNNING under a token no one held until its
    lease ran out, an attempt spent (with one attempt, FAILED, never run).
    The claim's tokens are known by its nonce: the next exchange releases
    the job, and the tick claims and runs it."""
    from tick.engine.api import Engine
    from tick.engine.spec import RunSpec

    def cutter(ctx: Any, payload: Any) -> None:
        proxy.drop_next_answer()  # the exchange recording this and claiming the next

    first = enqueue(conn, "cutter")
    second = enqueue(conn, "quiet", max_attempts=1)
    url = proxy.url_for(db_url)
    engine = Engine(lambda: connect(url),
                    registry=registry_with(cutter=cutter, quiet=lambda ctx, p: {"ran": True}))
    try:
        report = engine.run(RunSpec(max_jobs=10, deadline=time.monotonic() + 30,
                                    concurrency=1, reconnect=True, lease_secs=300))
    finally:
        engine.close()
    assert (report.completed, report.discarded, report.failed) == (2, 0, 0)
    rows = conn.execute("SELECT id, state, attempts, result FROM awc.jobs ORDER BY id").fetchall()
    assert rows == [(first, "COMPLETED", 1, None), (second, "COMPLETED", 1, {"ran": True})]


def test_a_tick_whose_first_exchange_lost_its_answer_opens_one_row_and_runs(
    db_url: str, conn: psycopg.Connection[Any], proxy: SilentProxy
) -> None:
    """The maintenance pass's exchange (the rescue, the tick's history row)
    commits and its answer is lost: the tick ended there, exit 1, its row
    left to be shown as died, though nothing was wrong but the connection.
    It now connects again and sends the pass again, which finds the row it
    opened by the run's key: one row, completed, and the job run once."""
    from tick.engine.api import Engine, maintenance_for
    from tick.engine.spec import RunSpec
    from tick.history import TickStart
    from tick.queue import new_nonce

    job = enqueue(conn, "quiet")
    url = proxy.url_for(db_url)
    engine = Engine(lambda: connect(url), registry=registry_with(quiet=lambda ctx, p: None),
                    maintenance=maintenance_for(86400.0))
    try:
        assert engine.conn is not None  # connected: the next answer is the pass's
        proxy.drop_next_answer()
        report = engine.run(RunSpec(history=TickStart("tick", "w-first", row_key=new_nonce()),
                                    max_jobs=10, deadline=time.monotonic() + 30,
                                    concurrency=1, reconnect=True))
    finally:
        engine.close()
    assert proxy.accepted == 2  # it did connect again
    assert (report.claimed, report.completed) == (1, 1)
    assert conn.execute("SELECT state, attempts FROM awc.jobs WHERE id = %s",
                        (job,)).fetchone() == ("COMPLETED", 1)
    assert conn.execute(
        "SELECT count(*), bool_and(finished_at IS NOT NULL AND error IS NULL), sum(completed) "
        "FROM awc.ticks WHERE worker_id = 'w-first'").fetchone() == (1, True, 1)


def test_jobs_claimed_with_an_answer_whose_count_was_lost_still_run(
    db_url: str, conn: psycopg.Connection[Any], proxy: SilentProxy,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exchange recording a job's outcome (refused by the fence: an
    operator cancelled the job) also claims the next job, and its answer
    arrives; the connection is lost while the tick reads why the outcome
    was refused. The claimed job was never handed to a slot: it sat RUNNING
    to its lease, an attempt spent, and the tick ended `drained`. It is
    handed out before that read now, and the outcome is counted once the
    connection is back."""
    import tick.engine.flush
    from tick.admin import cancel
    from tick.engine.api import Engine
    from tick.engine.spec import RunSpec

    reading = tick.engine.flush.lost_claims

    def lost_on_the_read(*args: Any) -> Any:
        if not cut:
            cut.append(True)
            proxy.drop_next_answer()  # the answer to this read
        return reading(*args)

    cut: list[bool] = []
    monkeypatch.setattr(tick.engine.flush, "lost_claims", lost_on_the_read)

    def doomed(ctx: Any, payload: Any) -> None:
        with connect(db_url) as other:
            cancel(other, ctx.job_id)

    first = enqueue(conn, "doomed")
    second = enqueue(conn, "quiet", max_attempts=1)
    engine = Engine(lambda: connect(proxy.url_for(db_url)), registry=registry_with(
        doomed=doomed, quiet=lambda ctx, p: {"ran": True}))
    try:
        report = engine.run(RunSpec(max_jobs=10, deadline=time.monotonic() + 30,
                                    concurrency=1, reconnect=True, lease_secs=300))
    finally:
        engine.close()
    assert cut, "the read of the refused outcome never ran"
    assert (report.completed, report.cancelled, report.failed) == (1, 1, 0)
    rows = conn.execute("SELECT id, state, attempts FROM awc.jobs ORDER BY id").fetchall()
    assert rows == [(first, "CANCELLED", 1), (second, "COMPLETED", 1)]


def test_a_statement_a_tick_gave_up_on_is_cancelled_not_committed_later(
    db_url: str, conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    """A server slow, not silent (a trigger of the operator's sleeping on
    every claimed row): the tick gives up on the claim at its deadline and
    closes the connection, and the server went on to commit the claim after
    the tick had exited, its jobs RUNNING to their leases, an attempt spent,
    never run. The statement is cancelled as it is given up on."""
    conn.execute("""
        CREATE FUNCTION slow_claims() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_sleep(10); RETURN NEW; END $$;
        CREATE TRIGGER slow_claims BEFORE UPDATE ON awc.jobs FOR EACH ROW
        WHEN (OLD.state = 'PENDING' AND NEW.state = 'RUNNING') EXECUTE FUNCTION slow_claims();
    """)
    ids = enqueue_many(conn, [{"kind": "noop"}] * 3)
    done, elapsed = timed_tick(awc_env, "--max-secs", "2")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert elapsed < 2 + 10, elapsed  # its deadline, the grace and the cancel's second
    busy = ("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name LIKE 'awc%%' AND state = 'active' AND pid <> pg_backend_pid()")
    wait_for(lambda: conn.execute(busy).fetchone() == (0,), timeout=3,
             what="the claim given up on to end on the server")
    rows = conn.execute("SELECT state, attempts FROM awc.jobs WHERE id = ANY(%s)",
                        (ids,)).fetchall()
    assert rows == [("PENDING", 0)] * 3


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", [("tick", "--max-secs", "30"), ("loop",)])
def test_a_connection_ended_as_the_schema_is_checked_is_ridden_out(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], command: tuple[str, ...],
) -> None:
    """A backend ended while `awc tick` or `awc loop` checked its schema (a
    failover, an administrator's pg_terminate_backend) ended the process,
    exit 1 with "database error: AdminShutdown", though nothing was wrong
    but that connection. It connects again, as it would later (0035)."""
    from tick.migrate import MIGRATION_LOCK_KEY

    job = enqueue(conn, "noop")
    holder = psycopg.connect(conn.info.dsn, autocommit=True)
    try:
        # The schema check waits for this lock: the moment to end its backend.
        holder.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
        proc = spawn(awc_env, *command)
        try:
            pid = wait_for(lambda: conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE wait_event = 'advisory' "
                "AND datname = current_database() AND pid <> %s", (holder.info.backend_pid,)
            ).fetchone(), timeout=20, what="the process to wait at its schema check")[0]
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
            holder.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
            if command[0] == "loop":
                wait_for(lambda: conn.execute("SELECT state = 'COMPLETED' FROM awc.jobs "
                                              "WHERE id = %s", (job,)).fetchone() == (True,),
                         timeout=30, what="the loop to run the job")
                proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=40)
        finally:
            stop(proc)
    finally:
        holder.close()
    assert proc.returncode == 0, err[-2000:]
    assert "awc:" not in err and "Traceback" not in err
    assert conn.execute("SELECT state, attempts FROM awc.jobs WHERE id = %s",
                        (job,)).fetchone() == ("COMPLETED", 1)


@pytest.mark.parametrize(("error", "ended"), [
    (psycopg.errors.AdminShutdown(), True),
    (psycopg.errors.CrashShutdown(), True),
    (psycopg.errors.IdleSessionTimeout(), True),
    (psycopg.errors.IdleInTransactionSessionTimeout(), True),
    (psycopg.errors.ConnectionFailure(), True),
    (psycopg.OperationalError("cannot exit pipeline mode while busy"), True),
    (psycopg.errors.QueryCanceled(), False),
    (psycopg.errors.DiskFull(), False),
    (psycopg.errors.PipelineAborted(), False),
    (psycopg.errors.CheckViolation(), False),
    (ValueError("not the database's"), False),
])
def test_an_error_that_ends_the_session_is_a_lost_connection(
    error: BaseException, ended: bool,
) -> None:
    """A FATAL from the server can reach psycopg before the socket's end: the
    connection does not look closed yet ("maintenance: OperationalError:
    cannot exit pipeline mode while busy" ended a tick). Told by the error,
    or by the one it was raised while handling."""
    from tick.faults import session_ended

    assert session_ended(error) is ended
    later = psycopg.errors.PipelineAborted()  # raised while handling `error`
    later.__context__ = error
    assert session_ended(later) is ended
