"""The benchmark's job kind: a handler that does nothing, so the figures
measure awc and PostgreSQL, not the work."""

from __future__ import annotations

import threading
from typing import Any

from tick import JobContext, handler


@handler("noop")
def noop(ctx: JobContext, payload: Any) -> None:
    return None


@handler("units")
def units(ctx: JobContext, payload: Any) -> None:
    """`units` steps, each hashing `unit_bytes` (0: no work), checkpointing
    every `every` of them (0: never) (bench.checkpoints)."""
    import hashlib

    total, every = int(payload["units"]), int(payload["every"])
    data = bytes(int(payload["unit_bytes"]))
    for unit in range(1, total + 1):
        if data:
            hashlib.sha256(data).digest()
        if every and unit % every == 0:
            ctx.checkpoint({"next": unit}, progress=unit / total)


@handler("sleep1ms")
def sleep1ms(ctx: JobContext, payload: Any) -> None:
    """A handler that waits 1 ms, as on a fast remote call (bench.handlers)."""
    import time

    time.sleep(0.001)


_OWN = threading.local()


@handler("onequery")
def onequery(ctx: JobContext, payload: Any) -> None:
    """A handler that runs one query on its own connection, kept per worker
    thread as a handler's own pool would keep it (bench.handlers): a row
    read by its key, as a handler reads its record. The row is a catalog's
    fixed one, so the query costs the same in every database: a count over
    `pg_class`, which this handler ran before, cost a quarter more in the
    bench's database than in awc before's, whose schema has fewer tables
    and whose catalog is fresh (99 vs 79 us a query), and so measured the
    catalogs, not awc."""
    import os

    import psycopg

    conn = getattr(_OWN, "conn", None)
    if conn is None:
        conn = _OWN.conn = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)
    conn.execute("SELECT typname FROM pg_type WHERE oid = 23").fetchone()
