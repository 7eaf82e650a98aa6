"""SPEC §2, §3: every URL-valued setting may carry a secret (`user:password@`);
no error path prints it, and a Pushgateway URL with credentials works."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import psycopg
import pytest

from tests.support import Context, run_awc
from tick.producer import enqueue

SECRET = "Pw7sEcReT"  # a password that must never be printed


def one_awc_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("awc: "), stderr[-2000:]
    return lines[0]


class Gateway(ThreadingHTTPServer):
    """A Pushgateway stand-in on loopback: remembers each push's method,
    path and Authorization header."""

    def __init__(self) -> None:
        self.pushes: list[tuple[str, str, str | None]] = []
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                gateway.pushes.append(("POST", self.path, self.headers.get("Authorization")))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    server = Gateway()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_pushgateway_password_is_sent_as_basic_auth_and_never_printed(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], gateway: Gateway
) -> None:
    enqueue(conn, "noop")
    port = gateway.server_address[1]
    url = f"http://push%40er:{SECRET}@127.0.0.1:{port}"
    done = run_awc({**awc_env, "AWC_PUSHGATEWAY_URL": url}, "tick")
    assert done.returncode == 0, done.stderr[-2000:]
    assert SECRET not in done.stdout + done.stderr
    expected = "Basic " + base64.b64encode(f"push@er:{SECRET}".encode()).decode()
    assert [auth for _, _, auth in gateway.pushes] == [expected, expected]
    assert all(path.startswith("/metrics/job/awc_tick/") for _, path, _ in gateway.pushes)


def test_a_pushgateway_url_with_a_password_and_no_port_does_not_fail_the_tick(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    # The report: http.client read "password@host" as a port, and
    # the `awc:` line quoted it. Now the push goes to port 80 with basic
    # auth; whether it lands or is missed (a warning), the tick's work stands.
    job = enqueue(conn, "noop")
    done = run_awc({**awc_env, "AWC_PUSHGATEWAY_URL": f"user:{SECRET}@127.0.0.1"}, "tick")
    assert done.returncode == 0, done.stderr[-2000:]
    assert SECRET not in done.stdout + done.stderr
    state = conn.execute("SELECT state FROM awc.jobs WHERE id = %s", (job,)).fetchone()
    assert state == ("COMPLETED",)


@pytest.mark.parametrize(("variable", "value"), [
    ("AWC_PUSHGATEWAY_URL", f"http://user:{SECRET}@127.0.0.1:port/"),
    ("AWC_PUSHGATEWAY_URL", f"http://user:{SECRET}@[::1/"),
    ("AWC_PUSHGATEWAY_URL", f"http://user:{SECRET}@127.0.0.1:99999/"),
    ("AWC_PUSHGATEWAY_URL", f"ftp://user:{SECRET}@127.0.0.1/"),
    ("AWC_S3_ENDPOINT_URL", f"http://key:{SECRET}@127.0.0.1:9000"),
    ("AWC_S3_ENDPOINT_URL", f"http://key:{SECRET}@127.0.0.1:x{SECRET}"),
    ("AWC_S3_ENDPOINT_URL", f"{SECRET}.example"),
    ("AWC_CAS_URL", f"s3://key:{SECRET}@bucket/prefix"),
    ("AWC_CAS_URL", f"s3://key:{SECRET}@[bucket/prefix"),
    ("AWC_CAS_URL", f"{SECRET}:%"),
    ("AWC_CAS_URL", f"{SECRET}:{SECRET}@bucket/prefix"),
    ("DATABASE_URL", f"postgresql://user:{SECRET}@127.0.0.1:x{SECRET}/db"),
])
def test_a_bad_url_setting_is_named_and_never_quoted(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], variable: str, value: str
) -> None:
    job = enqueue(conn, "noop")
    done = run_awc({**awc_env, variable: value}, "tick")
    assert done.returncode == 1
    line = one_awc_line(done.stderr)
    assert line.startswith(f"awc: invalid setting {variable}:") or \
        line.startswith(f"awc: {variable}:"), line
    assert SECRET.lower() not in (done.stdout + done.stderr).lower()
    state = conn.execute("SELECT state FROM awc.jobs WHERE id = %s", (job,)).fetchone()
    assert state == ("PENDING",)


def test_a_url_secret_quoted_by_any_library_is_redacted_from_the_awc_line() -> None:
    # The second line of defence: whatever message quoted a part of a URL
    # setting (http.client quoted "password@host" as a port), the `awc:`
    # line and a recorded tick error replace it.
    from tick.cli import shown
    from tick.redaction import keep_secret, url_secrets

    keep_secret(*url_secrets(f"http://user:{SECRET}@gateway"))
    assert shown(f"nonnumeric port: '{SECRET}@gateway'") == "nonnumeric port: '***@gateway'"
    assert SECRET not in shown(f"https://other:{SECRET[::-1]}@elsewhere/")


def test_a_log_line_never_carries_a_url_secret() -> None:
    # A crashed part's error or a library's message may quote a URL setting.
    import io

    from tick.events import StreamEvents
    from tick.redaction import keep_secret, url_secrets

    keep_secret(*url_secrets(f"https://user:{SECRET}@push.example:9091"))
    for fmt in ("json", "text"):
        out = io.StringIO()
        StreamEvents(fmt, out).log("error", "part_crashed",
                                   error=f"InvalidURL: nonnumeric port: '{SECRET}@push'")
        assert SECRET not in out.getvalue() and "***@push" in out.getvalue()


def test_an_error_leaving_the_lambda_never_carries_a_url_secret(
    lam: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Whatever raises inside an invocation (here a handler module that fails
    # to import, quoting the gateway it was given), the runtime logs a
    # message with the secret replaced.
    monkeypatch.setenv("AWC_S3_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWC_PUSHGATEWAY_URL", f"http://user:{SECRET}@127.0.0.1:9")
    monkeypatch.setenv("AWC_HANDLER_MODULES", f"tests.no_such_module_{SECRET}")
    with pytest.raises(Exception) as caught:
        lam.handler({}, Context(10))
    assert SECRET not in str(caught.value)


def test_a_user_name_alone_is_not_redacted() -> None:
    from tick.redaction import url_secrets

    assert url_secrets("postgresql://postgres@127.0.0.1/postgres") == []
    assert SECRET in url_secrets(f"http://user:{SECRET}@host")


def test_a_password_from_the_lambdas_rds_secret_is_redacted_too() -> None:
    import json

    from tick.drivers.lambda_secret import secret_dsn
    from tick.redaction import redacted

    password = f"rds-{SECRET}-only"
    secret_dsn(json.dumps({"host": "db", "username": "awc", "password": password}))
    assert password not in redacted(f"FATAL: something quoted {password} back")


def test_a_database_error_says_the_servers_primary_message_only(
        conn: psycopg.Connection[Any]) -> None:
    """A server error's DETAIL may quote a row's values, its CONTEXT the text
    of the statements of a function it passed through: neither reaches the
    `awc:` line (`awc retry` of a long chain printed a whole function's SQL,
    comments and all, when it reached the statement timeout)."""
    from tick.db import database_error

    conn.execute("CREATE TABLE test_keys (k text UNIQUE)")
    conn.execute("INSERT INTO test_keys VALUES ('alice@example.com')")
    conn.execute("""CREATE FUNCTION test_add(v text) RETURNS void LANGUAGE plpgsql AS $$
                    BEGIN
                        -- a comment the message never shows
                        INSERT INTO test_keys VALUES (v);
                    END $$""")
    with pytest.raises(psycopg.errors.UniqueViolation) as caught:
        conn.execute("SELECT test_add('alice@example.com')")
    assert "alice@example.com" in str(caught.value)  # the server did say it
    line = str(database_error(caught.value, None, "database error"))
    assert line == ('database error: UniqueViolation: duplicate key value violates unique '
                    'constraint "test_keys_k_key"')
    with pytest.raises(psycopg.errors.RaiseException) as caught:
        conn.execute("DO $$ BEGIN RAISE EXCEPTION '%', repeat('x', 5000); END $$")
    line = str(database_error(caught.value, None, "database error"))
    assert len(line) < 400 and line.endswith("…(5000 characters)")
