"""SPEC §3: every failure of a command is one `awc:` line and the right exit
code, never a traceback, a password or a payload; bad input writes nothing."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from tests.support import ROOT, awc_command, run_awc, spawn, wait_for, with_module
from tick.producer import enqueue

SECRET = "Zq9Vx7Kw"  # a password fragment that must never be printed


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWC_") and k != "DATABASE_URL"}
    env.update(PYTHONPATH=str(ROOT), **extra)
    return env


def one_awc_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("awc: "), stderr[-2000:]
    assert "Traceback" not in stderr
    return lines[0]


# -- connection strings (items 9, 10) ------------------------------------------------


@pytest.mark.parametrize("raw", ["%", "/", "@", "?", "#", "%4"])
def test_a_password_libpq_would_misread_is_refused_without_quoting_it(raw: str) -> None:
    url = f"postgresql://awc:{SECRET[:4]}{raw}{SECRET[4:]}@127.0.0.1:5432/awc"
    for args in (["status"], ["tick"], ["migrate"]):
        done = run_awc(clean_env(DATABASE_URL=url, AWC_CAS_URL="memory://"), *args)
        assert done.returncode == 1
        line = one_awc_line(done.stderr)
        assert line.startswith("awc: invalid setting DATABASE_URL:"), line
        assert SECRET[:4] not in done.stderr and SECRET[4:] not in done.stderr


@pytest.mark.parametrize("blank", ["", " ", "\t\n "])
def test_a_blank_database_url_is_missing_not_the_default_target(blank: str) -> None:
    done = run_awc(clean_env(DATABASE_URL=blank, AWC_CAS_URL="memory://"), "tick")
    assert (done.returncode, done.stderr) == (1, "awc: DATABASE_URL is required but not set\n")


@pytest.mark.parametrize(
    ("secret", "message"),
    [
        ('["postgresql://u:' + SECRET + '@h/db"]', "the secret is JSON but not an object"),
        ('"postgresql://u:' + SECRET[:4] + "@" + SECRET[4:] + '@h/db"', "raw '@'"),
        ("postgresql://u:" + SECRET[:4] + "/" + SECRET[4:] + "@h/db", "raw '@', '/'"),
        ('{"host": "h", "username": "u"}', "lacks host, username or password"),
        ('{"host": "h", "username": "u", "password": "' + SECRET + '", "port": "x"}',
         "port or dbname"),
        ("   ", "the secret is empty"),
        ('{"host": [', "not valid JSON"),
    ],
)
def test_a_lambda_secret_that_is_not_a_connection_is_named_never_quoted(
    secret: str, message: str
) -> None:
    from tick.drivers.lambda_secret import secret_dsn
    from tick.errors import SettingsError

    with pytest.raises(SettingsError) as caught:
        secret_dsn(secret)
    text = str(caught.value)
    assert text.startswith("AWC_DATABASE_SECRET_ARN: ") and message in text, text
    assert SECRET[:4] not in text and SECRET[4:] not in text


@pytest.mark.parametrize("encoded_twice", [False, True])
def test_a_lambda_secret_of_rds_json_may_hold_any_password(encoded_twice: bool) -> None:
    from tick.drivers.lambda_secret import secret_dsn

    doc = json.dumps({"host": "db", "port": 6432, "username": "awc",
                      "password": "p@ss/w%rd?#", "dbname": "q"})
    parts = conninfo_to_dict(secret_dsn(json.dumps(doc) if encoded_twice else doc))
    assert parts == {"host": "db", "port": "6432", "user": "awc", "password": "p@ss/w%rd?#",
                     "dbname": "q"}


# -- enqueue input (item 11) ------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--payload", '{"k": "' + SECRET + '\\u0000"}'], "--payload"),
        (["--payload", '{"k": "' + SECRET + '\\ud800"}'], "--payload"),
        (["--payload", '{"k": NaN, "s": "' + SECRET + '"}'], "--payload"),
        (["--payload", '{"k": 1e400, "s": "' + SECRET + '"}'], "--payload"),
        (["--payload", '{"k": ' + "[" * 50_000 + "]" * 50_000 + "}"], "--payload"),
        (["--delay", "inf"], "--delay"),
        (["--delay", "nan"], "--delay"),
        (["--delay", "1e12"], "--delay"),
        (["--delay", "-inf"], "--delay"),
        (["--timeout", "nan"], "--timeout"),
        (["--timeout", "inf"], "--timeout"),
        (["--timeout", "0"], "--timeout"),
        (["--max-attempts", "3000000000"], "--max-attempts"),
        (["--priority", "40000"], "--priority"),
        (["--queue", "q" * 3000], "--queue"),
        (["--dedupe-key", "d" * 3000], "--dedupe-key"),
        (["--queue", "a\udcffb"], "--queue"),
    ],
)
def test_enqueue_input_the_database_would_refuse_is_a_usage_error(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], args: list[str], option: str
) -> None:
    done = run_awc(awc_env, "enqueue", "k", *args)
    assert done.returncode == 2, done.stderr[-2000:]
    assert option in done.stderr and "Traceback" not in done.stderr
    assert SECRET not in done.stderr + done.stdout
    assert conn.execute("SELECT count(*) FROM awc.jobs").fetchone() == (0,)


def test_an_overlong_or_empty_kind_is_a_usage_error(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    for kind in ("k" * 201, ""):
        done = run_awc(awc_env, "enqueue", kind)
        assert done.returncode == 2 and "KIND" in done.stderr, done.stderr
    assert conn.execute("SELECT count(*) FROM awc.jobs").fetchone() == (0,)


@pytest.mark.parametrize(("args", "option"), [
    (["jobs", "list", "--kind", "a\udcffb"], "--kind"),
    (["jobs", "list", "--queue", "a\udcffb"], "--queue"),
    (["retry", "--kind", "a\udcffb"], "--kind"),
    (["cancel", "--queue", "a\udcffb"], "--queue"),
    (["jobs", "discard", "--kind", "a\udcffb"], "--kind"),
    (["tick", "--kind", "a\udcffb"], "--kind"),
    (["tick", "--queue", "q" * 201], "--queue"),
    (["loop", "--queue", "a\udcffb"], "--queue"),
    (["schedules", "pause", "a\udcffb"], "NAME"),
    (["schedules", "trigger", "a\udcffb"], "NAME"),
    (["schedules", "history", "a\udcffb"], "NAME"),
    (["schedules", "next", "a\udcffb"], "NAME"),
], ids=lambda value: value if isinstance(value, str) else "-".join(value[:2]))
def test_a_filter_or_a_name_no_job_can_have_is_a_usage_error(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], args: list[str], option: str
) -> None:
    # An argument that is not valid UTF-8 reaches Python as lone surrogates:
    # sent to the server, it made "awc: unexpected error" (exit 1) of an
    # operator command, a failed tick of `awc tick`, a loop that restarted
    # its part for ever. Refused before connecting, as enqueue's are.
    job = enqueue(conn, "k")
    done = run_awc(awc_env, *args)
    assert done.returncode == 2, done.stderr[-2000:]
    assert option in done.stderr and "Traceback" not in done.stderr
    assert conn.execute("SELECT state FROM awc.jobs WHERE id = %s", (job,)).fetchone() == (
        "PENDING",)
    assert conn.execute("SELECT count(*) FROM awc.ticks").fetchone() == (0,)


# -- one line for every failure (items 16, 17, 18) ---------------------------------------


def test_demo_with_a_bad_setting_names_it_without_its_value(tmp_path: Path) -> None:
    done = run_awc(clean_env(AWC_TICK_MAX_JOBS=f"lots-{SECRET}"), "demo", "--dir",
                   str(tmp_path / "d"))
    assert done.returncode == 1
    assert one_awc_line(done.stderr).startswith("awc: invalid setting AWC_TICK_MAX_JOBS:")
    assert SECRET not in done.stderr


def test_demo_in_an_unwritable_directory_is_one_line() -> None:
    done = run_awc(clean_env(), "demo", "--dir", "/proc/awc-demo")
    assert done.returncode == 1
    assert one_awc_line(done.stderr).startswith("awc: --dir: cannot use /proc/awc-demo")


def test_an_unwritable_textfile_is_a_startup_error_before_any_job_runs(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    job = enqueue(conn, "noop")
    done = run_awc({**awc_env, "AWC_METRICS_TEXTFILE": "/proc/awc.prom"}, "tick")
    assert done.returncode == 1
    assert one_awc_line(done.stderr).startswith("awc: AWC_METRICS_TEXTFILE: cannot write")
    state = conn.execute("SELECT state, attempts FROM awc.jobs WHERE id = %s", (job,))
    assert state.fetchone() == ("PENDING", 0)


def test_a_lock_timeout_in_an_operator_command_is_one_line(
    db_url: str, conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    job = enqueue(conn, "noop")
    dbname = conninfo_to_dict(db_url)["dbname"]
    conn.execute(f'ALTER DATABASE "{dbname}" SET lock_timeout = \'200ms\'')
    with psycopg.connect(db_url) as holder:
        holder.execute("SELECT 1 FROM awc.jobs WHERE id = %s FOR UPDATE", (job,))
        done = run_awc(awc_env, "cancel", str(job))
    assert done.returncode == 1
    line = one_awc_line(done.stderr)
    assert line.startswith("awc: database error: LockNotAvailable:"), line


def test_a_metrics_port_in_use_stops_the_loop_at_startup(awc_env: dict[str, str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_awc({**awc_env, "AWC_METRICS_PORT": str(port)}, "loop", timeout=60)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[-1].startswith(f"awc: AWC_METRICS_PORT: cannot listen on 127.0.0.1:{port}")
    assert "Traceback" not in done.stderr
    for line in lines[:-1]:
        json.loads(line)


def test_the_loop_serves_its_endpoints_on_an_ipv6_address(awc_env: dict[str, str]) -> None:
    # The server bound IPv4 only: `::1` was refused as an AWC_METRICS_PORT
    # problem, and an IPv6-only cluster's probes could not reach the loop.
    import urllib.request

    with socket.socket(socket.AF_INET6) as free:
        free.bind(("::1", 0))
        port = free.getsockname()[1]
    loop = spawn({**awc_env, "AWC_METRICS_ADDRESS": "::1", "AWC_METRICS_PORT": str(port)},
                 "loop")
    try:
        def healthy() -> bool:
            try:
                with urllib.request.urlopen(f"http://[::1]:{port}/healthz", timeout=2) as answer:
                    return bool(answer.status == 200)
            except OSError:
                return False

        assert wait_for(healthy, timeout=30, what="/healthz on [::1]")
    finally:
        loop.terminate()
        loop.communicate(timeout=30)


def test_a_metrics_address_that_does_not_resolve_is_named(awc_env: dict[str, str]) -> None:
    done = run_awc({**awc_env, "AWC_METRICS_ADDRESS": "no-such-host.invalid",
                    "AWC_METRICS_PORT": "9"}, "loop", timeout=60)
    assert done.returncode == 1
    last = done.stderr.splitlines()[-1]
    assert last.startswith("awc: AWC_METRICS_ADDRESS: cannot listen on no-such-host.invalid:9")


def test_json_logs_carry_library_records_as_json_events(
    tmp_path: Path, awc_env: dict[str, str]
) -> None:
    env = with_module(awc_env, tmp_path, "noisy_kinds", (
        "import logging, warnings\n"
        "logging.getLogger('psycopg').warning('pipeline aborted: password=%s', 'hunter2')\n"
        "warnings.warn('this API is going away')\n"))
    done = run_awc(env, "tick")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stderr.splitlines()]
    library = [e for e in events if e["event"] == "library_log"]
    assert {e["logger"] for e in library} == {"psycopg", "py.warnings"}
    assert all("hunter2" not in e["message"] for e in library)


# -- read-only commands never migrate (item 19) --------------------------------------------


@pytest.mark.parametrize("args", [["status"], ["jobs", "list"], ["jobs", "show", "1"],
                                  ["enqueue", "k"], ["retry", "1"], ["cancel", "1"], ["prune"]])
def test_operator_commands_on_a_fresh_database_create_nothing(
    empty_db_url: str, args: list[str]
) -> None:
    done = run_awc(clean_env(DATABASE_URL=empty_db_url), *args)
    assert done.returncode == 1
    assert one_awc_line(done.stderr) == (
        "awc: this database has no awc schema; run `awc migrate` first")
    with psycopg.connect(empty_db_url) as conn:
        assert conn.execute("SELECT to_regnamespace('awc')").fetchone() == (None,)


def test_operator_commands_on_a_schema_behind_say_to_migrate(
    db_url: str, conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    conn.execute("DELETE FROM awc.schema_migrations WHERE version = "
                 "(SELECT max(version) FROM awc.schema_migrations)")
    done = run_awc(awc_env, "status")
    assert done.returncode == 1
    line = one_awc_line(done.stderr)
    assert "is behind this awc" in line and "run `awc migrate`" in line


# -- the demo in a database it does not own (item 20) ---------------------------------------


@pytest.mark.timeout(180)
def test_demo_in_a_named_database_touches_only_what_it_creates(
    server_url: str, db_url: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    conn.execute("CREATE TABLE public.precious (v text)")
    conn.execute("INSERT INTO public.precious VALUES ('keep me')")
    conn.execute("INSERT INTO awc.tenants (id) VALUES ('acme')")
    theirs = enqueue(conn, "their_kind", {"x": 1})
    conn.execute("UPDATE awc.jobs SET state = 'COMPLETED', finished_at = now() - interval "
                 "'30 days' WHERE id = %s", (enqueue(conn, "old_done"),))
    before = conn.execute("SELECT id, state, attempts, updated_at FROM awc.jobs ORDER BY id"
                          ).fetchall()
    done = run_awc(clean_env(), "demo", "--dir", str(tmp_path / "d"), "--database-url", db_url,
                   timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "snapshot_validate" in done.stdout and "gc_sweep" in done.stdout
    after = conn.execute("SELECT id, state, attempts, updated_at FROM awc.jobs "
                         "WHERE id <= %s ORDER BY id", (max(r[0] for r in before),)).fetchall()
    assert after == before  # neither claimed, rescued nor pruned
    assert job_state(conn, theirs) == "PENDING"
    assert conn.execute("SELECT v FROM public.precious").fetchall() == [("keep me",)]
    demo_tenants = conn.execute("SELECT id FROM awc.tenants WHERE id <> 'acme'").fetchall()
    assert len(demo_tenants) == 1 and demo_tenants[0][0].startswith("demo-")
    assert conn.execute("SELECT count(*) FROM awc.snapshots WHERE tenant_id = 'acme'"
                        ).fetchone() == (0,)
    with psycopg.connect(server_url, autocommit=True) as admin:
        assert admin.execute("SELECT 1 FROM pg_database WHERE datname = 'awc_demo'"
                             ).fetchone() is None


def job_state(conn: psycopg.Connection[Any], job_id: int) -> str:
    row = conn.execute("SELECT state FROM awc.jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return str(row[0])


# -- awc loop --kind / --queue (item 21) ------------------------------------------------


def test_the_loop_claims_only_its_kinds_and_queues(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    mine = enqueue(conn, "noop", queue="fast")
    other_kind = enqueue(conn, "ledger", queue="fast")
    other_queue = enqueue(conn, "noop", queue="slow")
    proc = subprocess.Popen(awc_command("loop", "--kind", "noop", "--queue", "fast",
                                        "--concurrency", "2"),
                            env=awc_env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: job_state(conn, mine) == "COMPLETED", timeout=30, what="noop in fast")
        late = enqueue(conn, "noop", queue="fast")
        wait_for(lambda: job_state(conn, late) == "COMPLETED", timeout=30, what="a woken claim")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert job_state(conn, other_kind) == job_state(conn, other_queue) == "PENDING"


def test_a_command_whose_output_is_closed_says_so(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    """`awc enqueue noop >&-`: Python leaves no stdout, click printed nothing
    and said nothing, and the command exited 0 with the new job's id lost.
    A command that writes nothing there (`awc tick --as-events`) runs on."""
    import shlex

    def closed(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["sh", "-c", shlex.join(awc_command(*args)) + " >&-"],
                              env=awc_env, cwd=ROOT, capture_output=True, text=True, timeout=60)

    done = closed("enqueue", "noop")
    assert (done.returncode, done.stderr) == (1, "awc: standard output is closed\n")
    assert closed("tick", "--as-events").returncode == 0
