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
    thread as a handler's own pool would keep it (bench.handlers)."""
    import os

    import psycopg

    conn = getattr(_OWN, "conn", None)
    if conn is None:
        conn = _OWN.conn = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)
    conn.execute("SELECT count(*) FROM pg_class WHERE relkind = 'r'").fetchone()
