"""Test fixtures: a real PostgreSQL, a fresh migrated database per test.

The server is the one `DATABASE_URL` names, or else an embedded one started
for the session in a temporary directory. Each test that asks for `db_url`
gets its own database, cloned from a migrated template, so tests never see
each other's jobs.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from tests.kinds import LEDGER_DDL
from tick.db import connect
from tick.migrate import migrate

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = f"awc_tpl_{os.getpid()}"
_counter = itertools.count()


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """A maintenance connection string (database `postgres`) for the server."""
    given = os.environ.get("DATABASE_URL")
    if given:
        yield make_conninfo(given, dbname="postgres")
        return
    from tick.embedded import EmbeddedPostgres

    tmp = tempfile.mkdtemp(prefix="awc-test-pg-")
    server = EmbeddedPostgres(Path(tmp) / "data", keep=False)
    url = server.start()
    with psycopg.connect(url, autocommit=True) as conn:
        # Durability is not under test; commit latency would only slow the suite.
        conn.execute("ALTER SYSTEM SET synchronous_commit = off")
        conn.execute("ALTER SYSTEM SET max_connections = 200")
        conn.execute("SELECT pg_reload_conf()")
    yield url
    server.stop()


@pytest.fixture(scope="session")
def template_db(server_url: str) -> Iterator[str]:
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}"')
        admin.execute(f'CREATE DATABASE "{TEMPLATE}"')
    with connect(make_conninfo(server_url, dbname=TEMPLATE)) as conn:
        migrate(conn)
        conn.execute(LEDGER_DDL)
    yield TEMPLATE
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')


def _fresh_database(server_url: str, template: str | None) -> str:
    name = f"awc_t_{os.getpid()}_{next(_counter)}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if template:
            admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        else:
            admin.execute(f'CREATE DATABASE "{name}"')
    return name


@pytest.fixture
def db_url(server_url: str, template_db: str) -> Iterator[str]:
    """A connection string to a fresh, migrated database."""
    name = _fresh_database(server_url, template_db)
    yield make_conninfo(server_url, dbname=name)
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def empty_db_url(server_url: str) -> Iterator[str]:
    """A connection string to a fresh database with no awc schema."""
    name = _fresh_database(server_url, None)
    yield make_conninfo(server_url, dbname=name)
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def conn(db_url: str) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection to the test's database."""
    with connect(db_url) as c:
        yield c


@pytest.fixture
def awc_env(db_url: str) -> dict[str, str]:
    """The environment for an `awc` process against the test's database."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWC_")}
    env.update(
        DATABASE_URL=db_url,
        AWC_CAS_URL="memory://",
        AWC_HANDLER_MODULES="tests.kinds",
        PYTHONPATH=str(ROOT),
    )
    return env


def awc_command(*args: str) -> list[str]:
    """argv for the `awc` console script, run with this interpreter."""
    return [sys.executable, "-m", "tick.cli", *args]


def run_awc(
    env: dict[str, str], *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run `awc ARGS` to completion and capture its output."""
    return subprocess.run(
        awc_command(*args), env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


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


def job_row(conn: psycopg.Connection[Any], job_id: int) -> dict[str, Any]:
    """One job as a dict of its columns."""
    cur = conn.execute("SELECT * FROM awc.jobs WHERE id = %s", (job_id,))
    row = cur.fetchone()
    assert row is not None, f"job {job_id} is missing"
    assert cur.description is not None
    return {col.name: value for col, value in zip(cur.description, row, strict=True)}


# -- object stores ---------------------------------------------------------------


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


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[MotoS3]:
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    server = MotoS3()
    yield server
    server.stop()


def s3_settings(moto: MotoS3, bucket: str, **extra: Any) -> Any:
    from tick.settings import Settings

    options: dict[str, Any] = {"cas_url": f"s3://{bucket}/awc", "s3_endpoint_url": moto.endpoint,
                               "s3_region": "us-east-1", "s3_force_path_style": True}
    return Settings(**{**options, **extra})


def new_bucket(moto: MotoS3) -> str:
    import boto3

    name = f"awc-{os.getpid()}-{next(_counter)}"
    boto3.client("s3", endpoint_url=moto.endpoint, region_name="us-east-1").create_bucket(
        Bucket=name)
    return name


@pytest.fixture(params=["memory", "file", "s3"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    """Each store backend in turn, empty."""
    from tick.handlers.store import open_store

    if store_kind == "memory":
        return open_store("memory://")
    if store_kind == "file":
        return open_store(f"file://{tmp_path}/store")
    moto = request.getfixturevalue("moto_s3")
    settings = s3_settings(moto, new_bucket(moto))
    return open_store(settings.cas_url, settings)
