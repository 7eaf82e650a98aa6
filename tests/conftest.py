"""Test fixtures: a real PostgreSQL, a fresh migrated database per test.

The server is the one `DATABASE_URL` names, or else an embedded one started
for the session in a temporary directory. Each test that asks for `db_url`
gets its own database, cloned from a migrated template, so tests never see
each other's jobs.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from tests.kinds import LEDGER_DDL
from tests.support import (
    ROOT,
    TENANT,
    MotoS3,
    configure_handlers,
    fresh_database,
    moto_store,
    new_bucket,
)
from tick.db import connect
from tick.migrate import migrate

TEMPLATE = f"awc_tpl_{os.getpid()}"


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


@pytest.fixture
def db_url(server_url: str, template_db: str) -> Iterator[str]:
    """A connection string to a fresh, migrated database."""
    name = fresh_database(server_url, template_db)
    yield make_conninfo(server_url, dbname=name)
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def empty_db_url(server_url: str) -> Iterator[str]:
    """A connection string to a fresh database with no awc schema."""
    name = fresh_database(server_url, None)
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


# -- one console per module -----------------------------------------------------------------
# A module that overrides `db_url` with a module-scoped database (see
# tests/test_console.py) shares one `awc ui` process across its tests through
# `console`, emptied before each test: a process per test costs a second.


@pytest.fixture(scope="module")
def shared_console(db_url: str) -> Iterator[str]:
    from tests.support import read_stderr, start_console, stop

    env = {k: v for k, v in os.environ.items() if not k.startswith("AWC_")}
    env.update(DATABASE_URL=db_url, PYTHONPATH=str(ROOT))
    proc, base = start_console(env)
    read_stderr(proc)
    yield base
    stop(proc)


@pytest.fixture
def console(shared_console: str, conn: psycopg.Connection[Any]) -> str:
    """The module's `awc ui` over an emptied database."""
    conn.execute("TRUNCATE awc.jobs, awc.walk_marks, awc.audit_events, awc.schedules, "
                 "awc.schedule_fires, awc.ticks, awc.limits, awc.limit_claims "
                 "RESTART IDENTITY CASCADE")
    return shared_console


# -- object stores ---------------------------------------------------------------


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[MotoS3]:
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    server = MotoS3()
    yield server
    server.stop()


@pytest.fixture(params=["memory", "file", "s3"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    """Each store backend in turn, empty."""
    from tick.handlers.stores import open_store

    if store_kind == "memory":
        return open_store("memory://")
    if store_kind == "file":
        return open_store(f"file://{tmp_path}/store")
    moto = request.getfixturevalue("moto_s3")
    return moto_store(moto, new_bucket(moto))


@pytest.fixture
def env(db_url: str, store: Any, conn: psycopg.Connection[Any]) -> Iterator[Any]:
    """The built-in kinds installed over `store`, tenant `acme` created."""
    from tick.handlers.producer import ensure_tenant
    from tick.handlers.runtime import runtime

    configure_handlers(db_url, store)
    ensure_tenant(conn, TENANT)
    yield store
    runtime().close()


@pytest.fixture
def lam(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The Lambda module with a fresh warm state, pointed at the test database."""
    import tick.drivers.aws_lambda as module

    for name in list(os.environ):
        if name.startswith("AWC_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("AWC_CAS_URL", "memory://")
    monkeypatch.setenv("AWC_HANDLER_MODULES", "tests.kinds")
    monkeypatch.setenv("AWC_LAMBDA_MARGIN_SECS", "2")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "awc")
    module.WARM = module.Warm()
    yield module
    module.WARM.drop()
    module.WARM = module.Warm()


# The developer's inner loop is `pytest -m "not slow"` (README, Development):
# about a minute. These modules spawn processes, browsers, image builds or
# servers, or walk large tables; every test in them is `slow`, so CI (which
# runs everything) and the inner loop differ only by this list and the
# tests marked one by one.
SLOW_MODULES = frozenset({
    "test_bench_horizon", "test_bounded", "test_checkpoints", "test_cli_failures",
    "test_clocks", "test_console", "test_console_browser", "test_console_connections",
    "test_console_errors", "test_console_narrow", "test_console_operator", "test_console_plans",
    "test_container", "test_demo", "test_dependency_races", "test_deploy", "test_error_history",
    "test_gc_property",
    "test_gc_safety", "test_gc_sweep", "test_handlers", "test_host_settings", "test_key_limits",
    "test_lambda",
    "test_limit_costs", "test_limits", "test_long_walks", "test_loop", "test_loop_history",
    "test_operator_actions", "test_operator_cli", "test_packaging", "test_processes",
    "test_refused_outcomes", "test_schedules", "test_silent_database", "test_stores",
    "test_supervisor", "test_tick", "test_tick_log", "test_ticks", "test_timestamps",
    "test_tracing", "test_url_secrets", "test_leases",
})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.stem in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
