"""What a role or database sets that awc did not choose (SPEC §3, §12;
docs/decisions/0038): awc's connections pin the settings its reading of
results and its transactions rely on, the engine's transactions pin them
again (a transaction-pooling proxy may drop startup options), a migration
binds PostgreSQL's own built-ins whatever the search_path, and a database
that cannot hold any Unicode text is refused by name."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from tests.support import awc_command, fresh_database, run_awc
from tick.db import connect, one_exchange
from tick.migrate import migrate
from tick.statements import sql

pytestmark = pytest.mark.timeout(180)

# What production roles and databases are seen to set.
HOSTILE = {
    "default_transaction_isolation": "serializable",
    "extra_float_digits": "-15",
    "DateStyle": "SQL, DMY",
    "IntervalStyle": "sql_standard",
    "TimeZone": "Pacific/Chatham",
}


@pytest.fixture
def hostile_url(server_url: str, template_db: str) -> Iterator[str]:
    """A migrated database whose own settings are HOSTILE."""
    name = fresh_database(server_url, template_db)
    with psycopg.connect(server_url, autocommit=True) as admin:
        for setting, value in HOSTILE.items():
            admin.execute(f'ALTER DATABASE "{name}" SET {setting} = \'{value}\'')
    try:
        yield make_conninfo(server_url, dbname=name)
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def env_for(url: str) -> dict[str, str]:
    import os

    from tests.support import ROOT

    env = {k: v for k, v in os.environ.items() if not k.startswith("AWC_")}
    env.update(DATABASE_URL=url, AWC_CAS_URL="memory://", AWC_HANDLER_MODULES="tests.kinds",
               PYTHONPATH=str(ROOT))
    return env


def test_awc_connections_pin_what_they_read_whatever_the_database_sets(
        hostile_url: str) -> None:
    """A role's SERIALIZABLE failed outcomes (the jobs ran again after their
    leases), its extra_float_digits = -15 read a 26 s lease as 30 s, and a
    non-ISO DateStyle failed every command that read a timestamp."""
    with psycopg.connect(hostile_url) as plain:  # what the database gives
        assert plain.execute("SHOW extra_float_digits").fetchone() == ("-15",)
    with connect(hostile_url) as conn:
        with conn.transaction():
            row = conn.execute("SELECT current_setting('transaction_isolation'), "
                               "current_setting('DateStyle'), 26.123456789::float8, "
                               "now()").fetchone()
        assert row is not None
        assert row[:3] == ("read committed", "ISO, MDY", 26.123456789)
        assert isinstance(row[3], datetime)


def test_the_engine_s_transactions_pin_them_again_where_startup_options_are_dropped(
        hostile_url: str) -> None:
    """Behind a transaction-pooling proxy the connection's startup options
    may be dropped (PgBouncer's ignore_startup_parameters): each round trip
    begins READ COMMITTED and sets the floats and dates it reads."""
    from tick.db import pin_session

    with psycopg.connect(hostile_url, autocommit=True) as conn:  # no awc options at all
        pin_session(conn)  # as every awc connection is
        with one_exchange(conn):
            conn.execute(sql("pin_plans"))
            cur = conn.execute("SELECT current_setting('transaction_isolation'), "
                               "current_setting('DateStyle'), 26.123456789::float8")
        assert cur.fetchone() == ("read committed", "ISO, MDY", 26.123456789)


def test_ticks_drain_exactly_under_a_serializable_default(hostile_url: str) -> None:
    """Three `awc tick` processes at once on a database whose default is
    SERIALIZABLE: every job completed once, no tick failed (before: ticks
    exited 1 on serialization failures and finished jobs ran again)."""
    env = env_for(hostile_url)
    with psycopg.connect(hostile_url, autocommit=True) as conn:
        conn.execute("INSERT INTO awc.jobs (kind) SELECT 'noop' FROM generate_series(1, 300)")
    procs = [subprocess.Popen(awc_command("tick", "--concurrency", "8"), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [r[1][-400:] for r in results]
    with psycopg.connect(hostile_url) as conn:
        assert conn.execute("SELECT state, max(attempts), count(*) FROM awc.jobs "
                            "GROUP BY state").fetchall() == [("COMPLETED", 1, 300)]


def test_a_delay_and_the_operator_s_tables_read_under_a_foreign_date_style(
        hostile_url: str) -> None:
    """`awc enqueue --delay`, `awc jobs list`, `awc jobs show` and `awc
    ticks` under DateStyle 'SQL, DMY' (before: "can't parse timestamptz")."""
    env = env_for(hostile_url)
    done = run_awc(env, "enqueue", "noop", "--delay", "3600")
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip()
    for args in (["jobs", "list"], ["jobs", "show", job], ["ticks"], ["status"]):
        done = run_awc(env, *args)
        assert done.returncode == 0, (args, done.stderr)
    with psycopg.connect(hostile_url) as conn:
        row = conn.execute("SELECT extract(epoch FROM run_at - now()) FROM awc.jobs "
                           "WHERE id = %s", (int(job),)).fetchone()
    assert row is not None and 3500 < float(row[0]) <= 3600


def test_a_naive_run_at_is_utc_whatever_the_session_s_zone(hostile_url: str) -> None:
    """The Python API read a naive `run_at` in the session's TimeZone
    (Pacific/Chatham: 13 h 45 earlier), `awc enqueue --run-at` as UTC."""
    from tick.producer import enqueue, enqueue_many

    with psycopg.connect(hostile_url) as conn:
        ids = [enqueue(conn, "noop", run_at=datetime(2030, 1, 1)),
               *enqueue_many(conn, [{"kind": "noop", "run_at": datetime(2030, 1, 1)}] * 2),
               *enqueue_many(conn, [{"kind": "noop", "run_at": datetime(2030, 1, 1)}] * 300)]
        # (compared in SQL: this plain connection cannot read DateStyle SQL)
        row = conn.execute("SELECT count(*) FILTER (WHERE run_at = '2030-01-01 00:00+00'), "
                           "count(*) FROM awc.jobs WHERE id = ANY (%s)", (ids,)).fetchone()
    assert row == (303, 303)


def test_a_migration_binds_postgresql_s_built_ins_whatever_the_search_path(
        server_url: str) -> None:
    """A search_path that puts a schema of the user's before pg_catalog: the
    defaults `awc migrate` wrote named that schema's `now()`, for every
    client after (a plain-SQL job's run_at was 2000-01-01, never claimed)."""
    name = fresh_database(server_url, None)
    url = make_conninfo(server_url, dbname=name)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE SCHEMA evil")
            conn.execute("CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE sql "
                         "AS $$SELECT '2000-01-01 00:00+00'::timestamptz$$")
            conn.execute(f'ALTER DATABASE "{name}" SET search_path = evil, pg_catalog, public')
        with connect(url) as conn:
            migrate(conn)
        with psycopg.connect(url, autocommit=True) as conn:  # the user's search_path
            conn.execute("SET search_path = public")
            (job,) = conn.execute("INSERT INTO awc.jobs (kind) VALUES ('noop') "
                                  "RETURNING id").fetchone() or (None,)
            row = conn.execute("SELECT run_at > '2020-01-01', created_at > '2020-01-01' "
                               "FROM awc.jobs WHERE id = %s", (job,)).fetchone()
        assert row == (True, True)
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.parametrize("encoding", ["SQL_ASCII", "LATIN1"])
def test_a_database_that_cannot_hold_any_unicode_is_refused_by_name(
        server_url: str, encoding: str) -> None:
    """SQL_ASCII: `awc migrate` succeeded, then every command said a
    migration "was changed after it was applied"; LATIN1: a handler's error
    in Cyrillic turned a Retry into a dead letter. Refused at connect now,
    one `awc:` line naming the encoding, nothing created."""
    name = fresh_database(server_url, None)
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{name}"')
        admin.execute(f"CREATE DATABASE \"{name}\" ENCODING '{encoding}' TEMPLATE template0 "
                      "LC_COLLATE 'C' LC_CTYPE 'C'")
    url = make_conninfo(server_url, dbname=name)
    try:
        done = run_awc(env_for(url), "migrate")
        assert done.returncode == 1
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("awc: "), done.stderr
        assert encoding in done.stderr and "UTF8" in done.stderr
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT to_regnamespace('awc')").fetchone() == (None,)
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_claim_lost_to_a_completion_names_the_job_completed(
        conn: psycopg.Connection[Any]) -> None:
    """A completed job is in a finished part: read in the hot table alone,
    a claim whose job another claim completed (or its own, its answer lost
    with the connection) said MISSING. The finished row keeps the token of
    the claim that completed it, so its own completion is told from
    another's."""
    from tick.producer import enqueue
    from tick.queue import lost_claims

    job = enqueue(conn, "noop")
    conn.execute("UPDATE awc.jobs SET state = 'RUNNING', attempts = 1, claim_token = "
                 "gen_random_uuid(), locked_until = now() + interval '1 hour' WHERE id = %s",
                 (job,))
    (token,) = conn.execute("SELECT claim_token::text FROM awc.jobs WHERE id = %s",
                            (job,)).fetchone() or (None,)
    conn.execute(sql("complete_jobs"), {"ids": f"{{{job}}}", "tokens": f"{{{token}}}",
                                        "results": "{null}"}).fetchall()
    assert lost_claims(conn, [(job, token)]) == {job: ("COMPLETED", True)}
    stale = "00000000-0000-4000-8000-000000000000"  # an earlier claim's, rescued
    assert lost_claims(conn, [(job, stale)]) == {job: ("COMPLETED", False)}


def test_a_listener_the_server_ends_at_once_reconnects_ever_more_slowly(
        db_url: str, server_url: str) -> None:
    """A role's idle_session_timeout ends the loop's idle LISTEN connection
    a moment after each connect: it reconnected twice a second for as long as
    the loop ran. The delay starts again only after a connection that held."""
    import json
    import signal
    import time

    from tests.support import spawn

    with psycopg.connect(server_url, autocommit=True) as admin:
        name = psycopg.conninfo.conninfo_to_dict(db_url)["dbname"]
        admin.execute(f"ALTER DATABASE \"{name}\" SET idle_session_timeout = '300ms'")
    env = env_for(db_url)
    env.update(AWC_WORKER_POLL_INTERVAL_MS="100", AWC_LOG_FORMAT="json")
    proc = spawn(env, "loop")
    try:
        time.sleep(5.0)  # the window the reconnects are counted in
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    lost = [line for line in err.splitlines()
            if line.startswith("{") and json.loads(line).get("event") == "listener_lost"]
    # 0.25 s, 0.5, 1, 2 (and up to half again each), after 0.3 s connected:
    # at most 4 in 5 s (before: about 9).
    assert 1 <= len(lost) <= 5, len(lost)
    # And each says why, not only the error's class (what libpq saw: the
    # server's notice, or the socket it closed).
    details = [json.loads(line)["detail"] for line in lost]
    assert all(d.startswith("listening: OperationalError: ") and len(d) > 40
               for d in details), details


def test_the_operator_s_own_startup_options_are_kept(hostile_url: str) -> None:
    """`options=` in DATABASE_URL (a search_path, a work_mem): awc passed its
    own as a keyword, which replaced the operator's whole. They are kept,
    and change awc's timeouts, but not the settings awc reads by."""
    from psycopg.conninfo import conninfo_to_dict

    url = make_conninfo(hostile_url, options="-c work_mem=7MB -c statement_timeout=5s "
                                             "-c extra_float_digits=-15")
    assert conninfo_to_dict(url)["options"]
    with connect(url) as conn:
        row = conn.execute("SELECT current_setting('work_mem'), "
                           "current_setting('statement_timeout'), "
                           "current_setting('extra_float_digits'), 26.123456789::float8"
                           ).fetchone()
    assert row == ("7MB", "5s", "3", 26.123456789)


def test_awc_wait_reconnects_ever_more_slowly(db_url: str, server_url: str) -> None:
    """A role's idle_session_timeout ends `awc wait`'s connection a moment
    after each connect: it connected again at once, about five times a
    second to its timeout. It waits longer after each loss now."""
    from tick.producer import enqueue

    name = psycopg.conninfo.conninfo_to_dict(db_url)["dbname"]
    with psycopg.connect(db_url, autocommit=True) as conn:
        job = enqueue(conn, "noop")
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE \"{name}\" SET idle_session_timeout = '200ms'")
        sessions = ("SELECT sessions FROM pg_stat_database WHERE datname = %s")
        (before,) = admin.execute(sessions, (name,)).fetchone() or (0,)
        done = run_awc(env_for(db_url), "wait", str(job), "--timeout", "3")
        admin.execute("SELECT pg_stat_clear_snapshot()")
        (after,) = admin.execute(sessions, (name,)).fetchone() or (0,)
    assert done.returncode == 1 and "not final after 3s" in done.stderr, done.stderr
    # 0.2 s each, then 0.25, 0.5, 1, 2: five (before: about fifteen).
    assert after - before <= 7, after - before


def test_a_connection_whose_startup_options_a_pooler_dropped_is_pinned_again(
        hostile_url: str) -> None:
    """Behind PgBouncer the options are dropped: the operator's commands,
    the console's pool and the handlers' failed on every timestamp under a
    role's DateStyle 'SQL, DMY', and their transactions ran SERIALIZABLE."""
    from tick.db import pin_session
    from tick.loaders import for_operators

    with psycopg.connect(hostile_url, autocommit=True) as conn:  # no awc options at all
        pin_session(conn)
        for_operators(conn)
        with conn.transaction():
            row = conn.execute("SELECT current_setting('transaction_isolation'), "
                               "now() > '2020-01-01', pg_typeof(now())::text").fetchone()
        stamp = conn.execute("SELECT now()").fetchone()
    assert row == ("read committed", True, "timestamp with time zone")
    assert stamp is not None and isinstance(stamp[0], datetime)


def test_a_closed_connection_is_not_blamed_on_the_server() -> None:
    """libpq adds a guess to a connection closed under it, "This probably
    means the server terminated abnormally": in an `awc:` line after an
    administrator ended a backend, or a pooler restarted, it sent operators
    after a crash that never was. The line keeps libpq's finding only."""
    from tick.db import database_error

    error = psycopg.OperationalError(
        "consuming input failed: server closed the connection unexpectedly\n"
        "\tThis probably means the server terminated abnormally\n"
        "\tbefore or while processing the request.")
    shown = str(database_error(error, None, "recording outcomes and claiming"))
    assert shown == ("recording outcomes and claiming: OperationalError: consuming input "
                     "failed: server closed the connection unexpectedly")


def test_the_lines_of_a_database_error_stay_apart_in_its_awc_line() -> None:
    """psycopg's message after a pipeline broke holds two findings on two
    lines; run together they read "while busy server closed"."""
    from tick.db import database_error

    error = psycopg.OperationalError(
        "consuming input failed: cannot exit pipeline mode while busy\n"
        "server closed the connection unexpectedly\n"
        "\tThis probably means the server terminated abnormally\n"
        "\tbefore or while processing the request.")
    shown = str(database_error(error, None, "recording outcomes and claiming"))
    assert shown == ("recording outcomes and claiming: OperationalError: consuming input "
                     "failed: cannot exit pipeline mode while busy; server closed the "
                     "connection unexpectedly")


def test_a_database_in_replica_mode_is_refused_by_name(db_url: str, server_url: str,
                                                      tmp_path: Any) -> None:
    """`session_replication_role = replica` on awc's database or role (as a
    logical replication tool sets it) fires none of awc's triggers: the
    children of a failed parent waited for ever, `on_parent_failure=run`
    ones too, and nothing said why. Every command refuses it at the start,
    by name, and nothing is claimed."""
    from tick.producer import enqueue

    with psycopg.connect(db_url, autocommit=True) as conn:
        job = enqueue(conn, "noop")
    name = psycopg.conninfo.conninfo_to_dict(db_url)["dbname"]
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE \"{name}\" SET session_replication_role = replica")
    env = env_for(db_url)
    for args in (("tick", "--max-secs", "10"), ("migrate",), ("jobs", "list")):
        done = run_awc(env, *args)
        assert done.returncode == 1, (args, done.stderr)
        assert "Traceback" not in done.stderr
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith("awc: ") and "session_replication_role" in last, last
    # The demo on that database says so before it makes a directory.
    demo = run_awc(env, "demo", "--dir", str(tmp_path / "d"), "--database-url", db_url)
    assert demo.returncode == 1 and "session_replication_role" in demo.stderr, demo.stderr
    assert not (tmp_path / "d").exists()
    with psycopg.connect(db_url, autocommit=True) as conn:
        assert conn.execute("SELECT state FROM awc.jobs WHERE id = %s",
                            (job,)).fetchone() == ("PENDING",)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("code", ["configuration_limit_exceeded", "out_of_memory"])
def test_a_prune_the_server_refuses_ends_no_tick(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], code: str,
) -> None:
    """A due prune the server refused (a role's temp_file_limit, a lock
    table short of room for its locks) ended every tick before its claim,
    exit 1, and stayed due: the queue stood still. It is housekeeping: a
    `prune_failed` warning, and the tick claims and runs its jobs."""
    old = conn.execute("INSERT INTO awc.jobs (kind, state, finished_at) "
                       "VALUES ('noop', 'CANCELLED', now() - interval '30 days') "
                       "RETURNING id").fetchone()
    conn.execute("UPDATE awc.maintenance SET last_run_at = '-infinity' WHERE step = 'prune'")
    conn.execute("""
        CREATE FUNCTION refuse_prune() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'refused' USING ERRCODE = '""" + code + """'; END $$;
        CREATE TRIGGER refuse_prune BEFORE DELETE ON awc.jobs FOR EACH ROW
        WHEN (OLD.state = 'CANCELLED') EXECUTE FUNCTION refuse_prune();""")
    job = conn.execute("INSERT INTO awc.jobs (kind) VALUES ('noop') RETURNING id").fetchone()
    done = run_awc({**awc_env, "AWC_PRUNE_AFTER_SECS": "60"}, "tick", "--max-secs", "20")
    assert done.returncode == 0, done.stderr[-2000:]
    assert '"event":"prune_failed"' in done.stderr and "pruning: " in done.stderr
    assert "Traceback" not in done.stderr
    assert conn.execute("SELECT state FROM awc.jobs WHERE id = %s", job).fetchone() == (
        "COMPLETED",)
    assert conn.execute("SELECT state FROM awc.jobs WHERE id = %s", old).fetchone() == (
        "CANCELLED",)  # kept for the next prune, due still


@pytest.mark.timeout(90)
def test_maintenance_that_keeps_failing_is_in_readyz_and_an_ended_idle_session_skips_no_pass(
    conn: psycopg.Connection[Any], awc_env: dict[str, str],
) -> None:
    """`awc maintenance run` whose passes kept failing (the server short of
    locks for 30 s: no rescue meanwhile) answered /readyz 200 throughout;
    and a connection the server ended while it idled between passes
    (idle_session_timeout shorter than the interval) failed every other
    pass. Two failed passes in a row are in /readyz; an ended idle session
    is replaced at once."""
    from tests.support import free_port, http_get, read_stderr, spawn, stop, wait_for

    name = conn.info.dbname
    conn.execute(f'ALTER DATABASE "{name}" SET idle_session_timeout = \'1s\'')
    port = free_port()
    env = {**awc_env, "AWC_MAINTENANCE_INTERVAL_SECS": "2", "AWC_METRICS_PORT": str(port)}
    proc = spawn(env, "maintenance", "run")
    lines = read_stderr(proc)
    try:
        def passes() -> int:
            row = conn.execute("SELECT count(*) FROM awc.ticks WHERE driver = 'maintenance' "
                               "AND error IS NULL").fetchone()
            return int(row[0]) if row else 0

        wait_for(lambda: passes() >= 5, timeout=40, what="five passes")
        # Every interval's pass ran: none waited a second interval for the
        # connection the server had ended meanwhile (2 s apart, not 4).
        gaps = conn.execute(
            "SELECT extract(epoch FROM started_at - lag(started_at) OVER (ORDER BY id)) "
            "FROM awc.ticks WHERE driver = 'maintenance' AND error IS NULL "
            "ORDER BY id").fetchall()[1:]
        assert sorted(g for (g,) in gaps)[len(gaps) // 2] < 3.5, gaps
        assert http_get(f"http://127.0.0.1:{port}/readyz")[0] == 200
        # Nor is a connection ended while idle a failed pass to warn of.
        assert [ln for ln in lines if "maintenance_failed" in ln] == []
        conn.execute("""
            CREATE FUNCTION refuse_ticks() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'short' USING ERRCODE = 'out_of_memory'; END $$;
            CREATE TRIGGER refuse_ticks BEFORE INSERT ON awc.ticks FOR EACH ROW
            EXECUTE FUNCTION refuse_ticks();""")

        def unready() -> str | None:
            code, body = http_get(f"http://127.0.0.1:{port}/readyz")
            return body if code == 503 else None

        body = wait_for(unready, timeout=30, what="/readyz 503")
        assert "maintenance failing for" in body and "OutOfMemory" in body
        conn.execute("DROP TRIGGER refuse_ticks ON awc.ticks")
        wait_for(lambda: http_get(f"http://127.0.0.1:{port}/readyz")[0] == 200, timeout=30,
                 what="ready again")
    finally:
        stop(proc)
        conn.execute(f'ALTER DATABASE "{name}" RESET idle_session_timeout')


def test_a_large_enqueue_fits_a_small_temp_file_limit(conn: psycopg.Connection[Any]) -> None:
    """Reserving a batch's ids sorted them in the server, in a tuplestore
    and a sort that spilled to disk: a million jobs (the README's own
    example) failed under a role's 10 MB temp_file_limit. Streamed now."""
    from tick.producer import enqueue_many

    conn.execute("SET work_mem = '64kB'")
    conn.execute("SET temp_file_limit = '256kB'")
    ids = enqueue_many(conn, [{"kind": "noop"}] * 100_000)
    assert len(ids) == 100_000 and ids == sorted(ids) and len(set(ids)) == 100_000
    assert conn.execute("SELECT count(*) FROM awc.jobs").fetchone() == (100_000,)
