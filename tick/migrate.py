"""The migrations runner (SPEC §3).

Migrations are the numbered files `migrations/NNNN_name.sql`, shipped in the
wheel as `tick.migrations`. They run under an advisory lock, so any number of
processes may start at once; each applied file is recorded in
`awc.schema_migrations` with the SHA-256 of its bytes. A database that has a
migration this awc does not ship (a newer schema), or whose recorded checksum
differs from the shipped file, is refused before any job is claimed.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tick.errors import DatabaseError, MigrationError

if TYPE_CHECKING:
    import psycopg

# pg_advisory_xact_lock key for migrations: 'awc' 'mig' in ASCII.
MIGRATION_LOCK_KEY = 0x617763_6D6967
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

_CREATE_LEDGER = """
CREATE SCHEMA IF NOT EXISTS awc;
CREATE TABLE IF NOT EXISTS awc.schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


@dataclass(frozen=True, slots=True)
class Migration:
    """One shipped migration file."""

    version: int
    name: str
    sql: str
    checksum: str


@dataclass(frozen=True, slots=True)
class MigrationResult:
    """What `migrate` found and did."""

    applied: tuple[int, ...]
    current: int


def shipped() -> list[Migration]:
    """Every migration this awc ships, in version order."""
    found = []
    # The package's own directory (an editable install maps it elsewhere):
    # importlib.resources finds the same files for 5 ms more of imports on
    # every start.
    import importlib

    package = importlib.import_module("tick.migrations")
    for entry in Path(next(iter(package.__path__))).iterdir():
        match = _NAME.match(entry.name)
        if not match:
            continue
        data = entry.read_bytes()
        found.append(
            Migration(
                version=int(match.group(1)),
                name=match.group(2),
                sql=data.decode("utf-8"),
                checksum=hashlib.sha256(data).hexdigest(),
            )
        )
    found.sort(key=lambda m: m.version)
    return found


def _applied(conn: psycopg.Connection[Any]) -> dict[int, str]:
    exists = conn.execute("SELECT to_regclass('awc.schema_migrations') IS NOT NULL, "
                          "current_setting('session_replication_role')").fetchone()
    if exists and exists[1] == "replica":
        # PostgreSQL fires no ordinary trigger then, and awc's keep its
        # dependencies and its waiters (SPEC §20): a database or role set
        # so (as for a logical replication tool) left the children of a
        # failed parent waiting for ever. Refused at the start, by name.
        raise DatabaseError("the session's session_replication_role is 'replica', in which "
                            "PostgreSQL fires none of awc's triggers; reset it for awc's "
                            "role or database (ALTER ROLE ... RESET session_replication_role)")
    if not exists or not exists[0]:
        return {}
    rows = conn.execute("SELECT version, checksum FROM awc.schema_migrations").fetchall()
    return {int(version): str(checksum) for version, checksum in rows}


def _verify(applied: dict[int, str], known: list[Migration]) -> None:
    by_version = {m.version: m for m in known}
    unknown = sorted(v for v in applied if v not in by_version)
    if unknown and unknown[-1] > known[-1].version:
        raise MigrationError(
            f"the database schema is newer than this awc (it has migration {unknown[-1]:04d}, "
            f"this awc ships up to {known[-1].version:04d}); upgrade awc"
        )
    if unknown:  # below what this awc ships, and not one of its migrations
        raise MigrationError(
            f"awc.schema_migrations records migration {unknown[0]:04d}, which no awc "
            "ships; refusing to run"
        )
    # A migration older than the newest applied one but not recorded: applying
    # it now would run it over the schema the later ones made (0025 put
    # functions 0026 had replaced back, and every later run said "up to date").
    newest = max(applied, default=0)
    missing = [m for m in known if m.version < newest and m.version not in applied]
    if missing:
        raise MigrationError(
            f"awc.schema_migrations lacks migration {missing[0].version:04d}_{missing[0].name}, "
            f"older than the newest applied ({newest:04d}); refusing to apply it over the "
            "later ones: restore its row if it was applied"
        )
    for version, checksum in sorted(applied.items()):
        if by_version[version].checksum != checksum:
            raise MigrationError(
                f"migration {version:04d}_{by_version[version].name} was changed after it "
                "was applied (checksum differs); refusing to run"
            )


def require_current(conn: psycopg.Connection[Any]) -> None:
    """Refuse, without writing anything, a database whose awc schema is
    missing, behind, newer or changed (SPEC §3: the read-only and operator
    commands never create or alter the schema)."""
    known = shipped()
    applied = _applied(conn)
    _verify(applied, known)
    if not applied:
        raise MigrationError("this database has no awc schema; run `awc migrate` first")
    pending = [m for m in known if m.version not in applied]
    if pending:
        names = ", ".join(f"{m.version:04d}_{m.name}" for m in pending)
        raise MigrationError(
            f"the awc schema is behind this awc (pending: {names}); run `awc migrate`")


def migrate(
    conn: psycopg.Connection[Any], mode: Literal["auto", "check"] = "auto"
) -> MigrationResult:
    """Bring the schema up to date (`auto`) or refuse if anything is pending (`check`).

    `conn` is an autocommit connection; the whole run is one transaction, so a
    migration that fails leaves nothing half-applied.
    """
    from tick.watchdog import MIGRATION_LIMIT_SECS, migrating

    known = shipped()
    with conn.transaction():
        # A migration may run long on a large table, and waits here for
        # another process's: neither awc's statement timeout nor a role's
        # lock timeout may cut it (the watchdog bounds each exchange).
        # And the built-ins its defaults and functions name are PostgreSQL's,
        # whatever a role's search_path puts before them: a default bound to
        # a user's `now()` would outlive this run, for every client. (Every
        # migration names its schema: an unqualified CREATE would now aim at
        # pg_catalog and fail, loudly, rather than land in the role's first.)
        conn.execute("SELECT set_config('statement_timeout', %s, true), "
                     "set_config('lock_timeout', %s, true), "
                     "set_config('search_path', 'pg_catalog, public', true)",
                     (f"{int(MIGRATION_LIMIT_SECS)}s", f"{int(MIGRATION_LIMIT_SECS)}s"))
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
        applied = _applied(conn)
        _verify(applied, known)
        pending = [m for m in known if m.version not in applied]
        if pending and mode == "check":
            names = ", ".join(f"{m.version:04d}_{m.name}" for m in pending)
            raise MigrationError(
                f"pending migrations ({names}) and AWC_MIGRATE=check; run `awc migrate`"
            )
        if pending:
            conn.execute(_CREATE_LEDGER)
        for migration in pending:
            with migrating(conn):  # long on a large table; never cut by a tick's deadline
                conn.execute(migration.sql.encode("utf-8"))
            conn.execute(
                "INSERT INTO awc.schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                (migration.version, migration.name, migration.checksum),
            )
    current = known[-1].version if known else 0
    return MigrationResult(applied=tuple(m.version for m in pending), current=current)
