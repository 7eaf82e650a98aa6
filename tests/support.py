"""Helpers the tests share: the one drain helper, the one way to run and
spawn `awc` processes, the one database factory, polling, and the S3 test
double. Fixtures live in conftest.py."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from tick.handlers.stores.s3 import S3Store

from tick.engine.registry import Registry, handler
from tick.producer import enqueue_many

ROOT = Path(__file__).resolve().parent.parent
_counter = itertools.count()


@contextmanager
def building_the_checkout() -> Iterator[None]:
    """Held by a test while pip builds this checkout in place: setuptools
    writes ROOT/build, and two workers building at once failed one of them
    ("File exists: build/bdist.linux-x86_64/wheel/awc_worker-...dist-info").
    A lock file beside the system's temporary files, one per checkout; the
    lock goes with the file's closing."""
    import fcntl
    import hashlib
    import tempfile

    tag = hashlib.sha256(str(ROOT).encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"awc-tests-build-{tag}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


# -- databases -----------------------------------------------------------------------


def fresh_database(server_url: str, template: str | None) -> str:
    """A new database on the server, cloned from `template` (or empty); its name."""
    name = f"awc_t_{os.getpid()}_{next(_counter)}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if template:
            admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        else:
            admin.execute(f'CREATE DATABASE "{name}"')
    return name


def nested(depth: int) -> Any:
    """A list `depth` lists deep: deeper than the interpreter recurses, for
    the refusals of what is nested too deeply."""
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def job_row(conn: psycopg.Connection[Any], job_id: int) -> dict[str, Any]:
    """One job as a dict of its columns."""
    cur = conn.execute("SELECT * FROM awc.jobs WHERE id = %s", (job_id,))
    row = cur.fetchone()
    assert row is not None, f"job {job_id} is missing"
    assert cur.description is not None
    return {col.name: value for col, value in zip(cur.description, row, strict=True)}


TENANT = "acme"  # the tenant the handler tests work in


def snapshot_state(conn: psycopg.Connection[Any], snapshot_id: Any) -> tuple[str, Any]:
    """A snapshot's (state, verdict)."""
    row = conn.execute("SELECT state, verdict FROM awc.snapshots WHERE id = %s",
                       (snapshot_id,)).fetchone()
    assert row is not None
    return row[0], row[1]


def backdate(store: Any, digests: list[str], tenant: str = TENANT) -> None:
    """Age objects past GC's grace (a Tamperable store's set_modified)."""
    when = datetime.now(UTC) - timedelta(days=2)
    for digest in digests:
        store.set_modified(tenant, digest, when)


def refuse_claims(conn: psycopg.Connection[Any]) -> None:
    """Make every claim a statement the server refuses (a trigger raising on
    RUNNING): a permanent error, not a lost connection."""
    conn.execute("""
        CREATE FUNCTION refuse_claims() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'claims are refused here'; END $$;
        CREATE TRIGGER refuse_claims BEFORE UPDATE ON awc.jobs FOR EACH ROW
        WHEN (NEW.state = 'RUNNING') EXECUTE FUNCTION refuse_claims();
    """)


def drain(conn: psycopg.Connection[Any], **kw: Any) -> Any:
    """Run one tick of every registered kind until done (enqueue, drain, assert)."""
    from tick import tick
    from tick.engine.registry import REGISTRY

    return tick(conn, registry=REGISTRY, max_secs=60, max_jobs=1000, **kw)


def configure_handlers(db_url: str, store: Any, **extra: Any) -> None:
    """Install the built-in kinds over `store` with test-sized graces."""
    import tick.handlers as handlers

    from tick.settings import Settings

    base = {"gc_grace_secs": 3600, "retention_grace_secs": 60, "gc_canary_size": 2}
    handlers.configure(Settings(database_url=db_url, **{**base, **extra}), store)


# -- processes --------------------------------------------------------------------------


def awc_command(*args: str) -> list[str]:
    """argv for the `awc` console script, run with this interpreter."""
    return [sys.executable, "-m", "tick.cli", *args]


def with_module(env: dict[str, str], folder: Path, name: str, source: str) -> dict[str, str]:
    """`env` with one more handler module, `name`, written in `folder` from
    `source` (imported beside tests.kinds)."""
    (folder / f"{name}.py").write_text(source)
    return {**env, "AWC_HANDLER_MODULES": f"tests.kinds,{name}",
            "PYTHONPATH": f"{folder}:{env.get('PYTHONPATH', ROOT)}"}


def seen_waiting_on_a_lock(conn: psycopg.Connection[Any], pid: int,
                           timeout: float = 10) -> bool:
    """Poll until backend `pid` waits for a lock (a heavyweight one: a row's
    or a table's); False if it never did within `timeout` seconds."""
    import time

    until = time.monotonic() + timeout
    while time.monotonic() < until:
        if conn.execute("SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s",
                        (pid,)).fetchone() == (True,):
            return True
        time.sleep(0.002)
    return False


def run_awc(
    env: dict[str, str], *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run `awc ARGS` to completion and capture its output."""
    return subprocess.run(
        awc_command(*args), env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def spawn(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """Start `awc ARGS` in the background, its output piped."""
    return subprocess.Popen(awc_command(*args), env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for(
    predicate: Callable[[], Any], timeout: float = 20, interval: float = 0.05, what: str = ""
) -> Any:
    """Poll `predicate` until it returns a true value; fail after `timeout`."""
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


# -- HTTP -------------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(url: str) -> tuple[int, str]:
    """GET `url`: (status, body), also for an HTTP error status."""
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()



def http_up(url: str) -> bool:
    """True once `url` answers 200."""
    try:
        return http_get(url)[0] == 200
    except OSError:
        return False


# -- S3 -----------------------------------------------------------------------------------


class MotoS3:
    """A moto S3 server on 127.0.0.1 that a test may stop and start again."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self._cls = ThreadedMotoServer
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        _, self.port = self.server.get_host_and_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.stop()

    def restart(self) -> None:
        # moto keeps its buckets in-process: a new server on the same port
        # serves the same objects, as an S3 endpoint coming back would.
        self.server = self._cls(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()


class MotoS3Store(S3Store):
    """The S3 store against the in-process moto server, with the test-only
    `set_modified` (stores/base.py: Tamperable) that S3 itself has no API for:
    it ages the object in moto's own backend."""

    def set_modified(self, tenant_id: str, digest: str, when: datetime) -> None:
        from moto.s3.models import s3_backends

        key = self._key(tenant_id, digest)
        for regions in s3_backends.values():
            bucket = regions["global"].buckets.get(self.bucket)
            if bucket is not None and key in bucket.keys:
                bucket.keys[key].last_modified = when.replace(tzinfo=None)
                return
        raise KeyError(key)


def s3_settings(moto: MotoS3, bucket: str, **extra: Any) -> Any:
    """Settings for an s3:// store on the moto server."""
    from tick.settings import Settings

    options: dict[str, Any] = {"cas_url": f"s3://{bucket}/awc", "s3_endpoint_url": moto.endpoint,
                               "s3_region": "us-east-1", "s3_force_path_style": True}
    return Settings(**{**options, **extra})


def new_bucket(moto: MotoS3) -> str:
    """A new empty bucket on the moto server; its name."""
    import boto3

    name = f"awc-{os.getpid()}-{next(_counter)}"
    boto3.client("s3", endpoint_url=moto.endpoint, region_name="us-east-1").create_bucket(
        Bucket=name)
    return name


def moto_store(moto: MotoS3, bucket: str, **extra: Any) -> MotoS3Store:
    """An s3:// store on `bucket`, tamperable like the other two."""
    settings = s3_settings(moto, bucket, **extra)
    return MotoS3Store(bucket, "awc", endpoint_url=settings.s3_endpoint_url,
                       region=settings.s3_region, path_style=True)


# -- the console ------------------------------------------------------------------------

CONSOLE_TOKEN = "console-test-token-0123456789"


def start_console(env: dict[str, str], *args: str, token: str | None = CONSOLE_TOKEN,
                  read_only: bool = False) -> tuple[subprocess.Popen[str], str]:
    """Start `awc ui --port 0` and return it with its base URL, read from the
    one line it prints once it listens."""
    from tick.cli_ui import served_at

    env = {**env, "AWC_UI_READ_ONLY": "true" if read_only else "false"}
    if token is not None:
        env["AWC_UI_TOKEN"] = token
    proc = spawn(env, "ui", "--port", "0", *args)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    base = served_at(line)
    if base is None:
        proc.kill()
        raise AssertionError(f"awc ui did not start: {line.strip()}")
    return proc, base


def read_stderr(proc: subprocess.Popen[str]) -> list[str]:
    """Collect `proc`'s stderr lines as it writes them (a console logs an
    event per error: a pipe nobody reads would fill and stall it)."""
    import threading

    lines: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))

    threading.Thread(target=read, daemon=True).start()
    return lines


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def login_nonce(html: str) -> str:
    import re

    found = re.search(r'name="login_nonce" value="([^"]+)"', html)
    assert found is not None, "the sign-in form has no nonce"
    return found.group(1)


def csrf_of(html: str) -> str:
    import re

    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None, "the page has no CSRF field"
    return found.group(1)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


def new_browser() -> Any:
    """Debian's headless Chromium through its chromedriver (Selenium)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                 "--disable-gpu", "--window-size=1400,1000", "--no-first-run"):
        options.add_argument(flag)
    browser = webdriver.Chrome(service=Service(str(DRIVER)), options=options)
    browser.set_page_load_timeout(30)
    return browser


def need_browser() -> None:
    """Fail in CI, skip elsewhere, when Debian's browser is missing."""
    import pytest

    if CHROMIUM and DRIVER:
        return
    message = "needs Debian's chromium and chromium-driver (.ci/run installs them)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def dead_letters(conn: psycopg.Connection[Any], n: int) -> list[int]:
    """`n` mail jobs that failed for good; their ids."""
    ids = enqueue_many(conn, [{"kind": "mail", "payload": {"n": i}} for i in range(n)])
    conn.execute("UPDATE awc.jobs SET state = 'FAILED', attempts = max_attempts, "
                 "last_error = 'SMTPError: 550 mailbox unavailable', finished_at = now() "
                 "WHERE id = ANY(%s)", (ids,))
    return ids


def sign_in(browser: Any, base: str) -> None:
    from selenium.webdriver.common.by import By

    browser.get(base + "/login")
    browser.find_element(By.NAME, "token").send_keys(CONSOLE_TOKEN)
    browser.find_element(By.CSS_SELECTOR, "form[action='/login'] button").click()
    wait_for(lambda: browser.find_elements(By.LINK_TEXT, "Overview"), timeout=15,
             what="the overview after signing in")


def signed_in(base: str, token: str = CONSOLE_TOKEN) -> Any:
    """An httpx client with a console session."""
    import httpx

    client = httpx.Client(base_url=base, timeout=10, follow_redirects=False)
    nonce = login_nonce(client.get("/login").text)
    answer = client.post("/login", data={"token": token, "login_nonce": nonce, "next": "/"})
    assert answer.status_code == 303, answer.status_code
    return client


# -- plans (EXPLAIN guards) ------------------------------------------------------------


@contextmanager
def migrated_database(server_url: str, template_db: str) -> Iterator[str]:
    """A fresh migrated database for one module's plans, dropped afterwards."""
    from psycopg.conninfo import make_conninfo

    name = fresh_database(server_url, template_db)
    try:
        yield make_conninfo(server_url, dbname=name)
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def nodes(text: str) -> list[dict[str, Any]]:
    """Every node of an EXPLAIN (FORMAT JSON) plan."""
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "Node Type" in node:
                found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(text))
    return found


def scans(text: str) -> list[tuple[str, str]]:
    """(node type, index) of every scan of a relation."""
    return [(n["Node Type"], n.get("Index Name", "")) for n in nodes(text)
            if "Relation Name" in n and n["Node Type"] != "ModifyTable"]


def sorted_walk(text: str) -> bool:
    """True if the plan sorts what it reads from a ready index (the walk must
    come in the index's order and stop at its LIMIT; sorting a batch already
    taken, or one row a limited walk returned, is fine)."""
    ready = {"jobs_ready_idx", "jobs_ready_queue_idx", "jobs_ready_lane_idx"}

    def unbounded_scan(node: dict[str, Any]) -> bool:
        if node.get("Index Name") in ready:
            return True
        return any(unbounded_scan(child) for child in node.get("Plans", [])
                   if child["Node Type"] != "Limit")

    return any(n["Node Type"] == "Sort" and unbounded_scan(n) for n in nodes(text))


def seq_scanned(text: str, relation: str) -> bool:
    """True if the plan reads `relation` with a sequential scan."""
    return any(n["Node Type"] == "Seq Scan" and n.get("Relation Name") == relation
               for n in nodes(text))


# -- engines and the Lambda ----------------------------------------------------------


def registry_with(**fns: Any) -> Registry:
    """A registry with one handler per keyword: kind=function."""
    reg = Registry()
    for kind, fn in fns.items():
        handler(kind, registry=reg)(fn)
    return reg


# What EventBridge Scheduler sends with awc's template Input.
SCHEDULER_EVENT = {
    "scheduled_time": "2026-11-29T10:00:00Z",
    "execution_id": "c7a6f0e2-5d2b-4a7e-9a1e-2f6f3c1d9b10",
}


class Context:
    """A Lambda context with a fixed remaining time."""

    function_name = "awc-tick"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:awc-tick:live"
    log_group_name = "/aws/lambda/awc-tick"
    log_stream_name = "2026/11/29/[$LATEST]abc"

    def __init__(self, remaining_s: float = 10) -> None:
        self.aws_request_id = str(uuid.uuid4())
        self._end = time.monotonic() + remaining_s

    def get_remaining_time_in_millis(self) -> int:
        return int((self._end - time.monotonic()) * 1000)


def at_version(conn: psycopg.Connection[Any], version: int) -> None:
    """The schema as an awc that shipped migrations up to `version` left it."""
    from tick.migrate import _CREATE_LEDGER, shipped

    with conn.transaction():
        conn.execute(_CREATE_LEDGER)
        for migration in shipped():
            if migration.version > version:
                break
            conn.execute(migration.sql.encode("utf-8"))
            conn.execute("INSERT INTO awc.schema_migrations (version, name, checksum) "
                         "VALUES (%s, %s, %s)",
                         (migration.version, migration.name, migration.checksum))
