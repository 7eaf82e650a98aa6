"""SPEC §3: migrations — declared schema, locking, refusals before any claim."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support import ROOT, awc_command, building_the_checkout, job_row, run_awc
from tick.db import connect
from tick.errors import MigrationError
from tick.migrate import migrate, shipped
from tick.producer import enqueue

CATALOG = {
    "columns": """
        SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
               a.attidentity, pg_get_expr(d.adbin, d.adrelid)
        FROM pg_attribute a
        JOIN pg_class c ON c.oid = a.attrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE n.nspname = 'awc' AND a.attnum > 0 AND NOT a.attisdropped AND c.relkind = 'r'
        ORDER BY 1, 2""",
    "constraints": """
        SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)
        FROM pg_constraint WHERE connamespace = 'awc'::regnamespace ORDER BY 1, 2""",
    "indexes": "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'awc' ORDER BY 1",
    "triggers": """
        SELECT tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t
        JOIN pg_class c ON c.oid = t.tgrelid
        WHERE c.relnamespace = 'awc'::regnamespace AND NOT t.tgisinternal ORDER BY 1""",
    "functions": """
        SELECT proname, md5(prosrc), proconfig FROM pg_proc
        WHERE pronamespace = 'awc'::regnamespace ORDER BY 1""",
}


def catalog(conn: psycopg.Connection[Any]) -> dict[str, list[Any]]:
    return {name: conn.execute(query).fetchall() for name, query in CATALOG.items()}  # type: ignore[arg-type]


def test_migrations_produce_exactly_the_declared_schema(
    db_url: str, empty_db_url: str
) -> None:
    with connect(empty_db_url) as declared:
        declared.execute((ROOT / "docs" / "schema.sql").read_bytes())
        want = catalog(declared)
    with connect(db_url) as migrated:
        got = catalog(migrated)
    for part in CATALOG:
        assert got[part] == want[part], part


def test_migrate_records_versions_with_checksums(conn: psycopg.Connection[Any]) -> None:
    rows = conn.execute("SELECT version, name, checksum FROM awc.schema_migrations").fetchall()
    assert [(m.version, m.name, m.checksum) for m in shipped()] == rows
    assert all(len(checksum) == 64 for _, _, checksum in rows)


def test_migrate_twice_applies_nothing(conn: psycopg.Connection[Any]) -> None:
    assert migrate(conn).applied == ()


def test_check_mode_refuses_a_database_with_pending_migrations(empty_db_url: str) -> None:
    with connect(empty_db_url) as conn:
        with pytest.raises(MigrationError, match=r"pending migrations .*AWC_MIGRATE=check"):
            migrate(conn, "check")
        assert conn.execute("SELECT to_regclass('awc.jobs')").fetchone() == (None,)
        migrate(conn, "auto")
        assert migrate(conn, "check").applied == ()


def test_a_newer_schema_is_refused_before_any_claim(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "noop")
    conn.execute("INSERT INTO awc.schema_migrations VALUES (9999, 'future', 'x', now())")
    done = run_awc(awc_env, "tick")
    assert done.returncode == 1
    assert done.stderr.startswith("awc: the database schema is newer than this awc")
    assert job_row(conn, job_id)["state"] == "PENDING"


def test_a_changed_migration_is_refused(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "noop")
    conn.execute("UPDATE awc.schema_migrations SET checksum = 'abc' WHERE version = 1")
    done = run_awc(awc_env, "tick")
    assert done.returncode == 1
    assert "was changed after it was applied" in done.stderr
    assert job_row(conn, job_id)["state"] == "PENDING"


def test_concurrent_processes_migrate_an_empty_database_once(empty_db_url: str) -> None:
    env = {"DATABASE_URL": empty_db_url, "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    procs = [subprocess.Popen(awc_command("migrate"), env=env, cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outputs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], outputs
    assert sum("applied" in out for out, _ in outputs) == 1
    with connect(empty_db_url) as conn:
        assert conn.execute("SELECT count(*) FROM awc.schema_migrations").fetchone() == (
            len(shipped()),)


@pytest.mark.timeout(300)
def test_a_non_editable_install_can_migrate(tmp_path: Path, empty_db_url: str) -> None:
    """SPEC §1: the migrations ship inside the wheel, not beside the source."""
    with building_the_checkout():  # pip builds the checkout in place
        built = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"),
             str(ROOT)], capture_output=True, text=True, timeout=240)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("awc_worker-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "tick/migrations/0001_jobs.sql" in names and "tick/sql/claim_jobs.sql" in names
    # Installed on its own, ahead of the source tree and any editable install.
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(target), str(wheel)], check=True, timeout=120, capture_output=True)
    env = {"DATABASE_URL": empty_db_url, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(target)}
    done = subprocess.run([sys.executable, "-m", "tick.cli", "migrate"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("applied 0001")
    where = subprocess.run([sys.executable, "-c", "import tick.migrate as m; print(m.__file__)"],
                           env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert where.stdout.startswith(str(target))


@pytest.mark.parametrize(("ledger", "said"), [
    ("DELETE FROM awc.schema_migrations WHERE version = 25",
     "lacks migration 0025_dependency_functions_plan_their_own, older than the newest"),
    ("INSERT INTO awc.schema_migrations VALUES (-1, 'odd', 'x', now())",
     "records migration -001, which no awc ships"),
], ids=["a-gap", "an-unknown-version"])
def test_a_ledger_with_a_gap_or_an_unknown_version_is_refused(
    conn: psycopg.Connection[Any], ledger: str, said: str
) -> None:
    # With 0025's row gone, awc migrate applied 0025 again over 0026's
    # functions (putting back what 0026 replaced) and said "up to date" after.
    conn.execute(ledger)
    before = conn.execute("SELECT md5(string_agg(prosrc, '' ORDER BY proname)) FROM pg_proc "
                          "WHERE pronamespace = 'awc'::regnamespace").fetchone()
    with pytest.raises(MigrationError, match=said):
        migrate(conn)
    after = conn.execute("SELECT md5(string_agg(prosrc, '' ORDER BY proname)) FROM pg_proc "
                         "WHERE pronamespace = 'awc'::regnamespace").fetchone()
    assert after == before


def test_a_migration_waits_past_awc_s_and_the_role_s_timeouts(db_url: str) -> None:
    # Another process's migration holds the lock; a role's lock_timeout of
    # 1 ms failed the wait (LockNotAvailable), and awc's statement timeout
    # would cut a migration longer than it on a large table.
    import threading

    from tick.migrate import MIGRATION_LOCK_KEY

    with psycopg.connect(db_url, autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE {admin.info.dbname} SET lock_timeout = '1ms'")
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with psycopg.connect(db_url, autocommit=True) as other:
            other.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(10)
        with connect(db_url) as conn:
            conn.execute("SET statement_timeout = 300")  # awc's 60 s, at a test's scale
            threading.Timer(1.0, release.set).start()
            assert migrate(conn).applied == ()
    finally:
        release.set()
        holder.join(10)
