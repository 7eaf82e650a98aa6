"""What a Lambda execution environment keeps between warm invocations
(SPEC §8): the settings, the connection and the engine.

The connection is opened through the drivers' composition (`open_database`)
on first use, migrated on a cold start only, and kept across warm
invocations. It is not pinged: a warm invocation with nothing to do costs two
round trips, maintenance and one claim. A connection the database dropped
while the environment was frozen fails the tick's first statement; the
handler then opens a new one and runs the tick once more
(`tick.drivers.aws_lambda`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tick.drivers.compose import open_database, prepare_handlers
from tick.drivers.lambda_secret import database_url
from tick.engine.api import Engine
from tick.settings import Settings, load_settings

if TYPE_CHECKING:
    import psycopg


@dataclass
class Warm:
    """What survives between warm invocations of one execution environment."""

    settings: Settings | None = None
    conn: psycopg.Connection[Any] | None = None
    engine: Engine | None = None
    migrated: bool = False
    connects: int = 0

    prepared: bool = False
    reused: bool = False  # this invocation's connection was a warm one

    def load(self) -> Settings:
        if self.settings is None:
            settings = load_settings()
            settings.require_cas_url()
            if settings.database_secret_arn is None:
                settings.dsn()  # fail now, clearly, if it is missing
            self.settings = settings
        return self.settings

    def prepare(self, settings: Settings) -> None:
        """Open the store and register handlers, after connect and migrate (SPEC §3)."""
        if not self.prepared:
            prepare_handlers(settings)
            self.prepared = True

    def connection(
        self, settings: Settings, answer_by: float | None = None,
        ride_out_until: float | None = None,
    ) -> psycopg.Connection[Any]:
        """The warm connection, or a new one when there is none or it broke
        (not pinged: see the module's docstring); one lost as the schema is
        checked is ridden out until `ride_out_until` (`open_database`)."""
        if self.conn is not None and not self.conn.closed and not self.conn.broken:
            self.reused = True
            return self.conn
        if self.conn is not None:
            self.conn.close()
        self.reused = False
        from tick.watchdog import watch

        # Connect and migrate by the invocation's deadline (`answer_by`), even
        # against a silent server; the warm connection then outlives it.
        conn = open_database(
            settings, answer_by=answer_by, dsn=database_url(settings), migrations=not self.migrated,
            ride_out_until=ride_out_until)
        self.migrated = True  # cold start only
        watch(conn, answer_by=None)
        self.conn = conn
        self.connects += 1
        return conn

    def current(self, settings: Settings) -> psycopg.Connection[Any]:
        """The warm connection as it is (this invocation's `connection`
        already chose it), or a new one: the engine's connection factory."""
        if self.conn is not None and not self.conn.closed and not self.conn.broken:
            return self.conn
        return self.connection(settings)

    def drop(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.conn = None
