"""Counting a connection's exchanges with the server: the round-trip
budgets the tests (and `bench.lambda_warm`) hold awc to (SPEC §6, §16)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg


def exchanges(conn: psycopg.Connection[Any], run: Callable[[], Any]) -> int:
    """How many exchanges `run()` has with the server on `conn` (`sent`)."""
    return len(sent(conn, run))


def sent(conn: psycopg.Connection[Any], run: Callable[[], Any]) -> list[str]:
    """What `run()` sends to the server on `conn`, exchange by exchange,
    from libpq's own trace of the connection: each turn's client messages
    (its F lines), up to the server's answers (B). Statements are not prepared meanwhile, since
    psycopg prepares one in an exchange of its own at its fifth use. For
    tests and benchmarks that hold awc to a round-trip budget (awc itself
    never counts: this lives with the tests, and the benchmarks borrow it)."""
    import tempfile

    from psycopg import pq

    threshold, conn.prepare_threshold = conn.prepare_threshold, None
    with tempfile.TemporaryFile("w+") as trace:
        conn.pgconn.trace(trace.fileno())
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            run()
        finally:
            conn.pgconn.untrace()
            conn.prepare_threshold = threshold
        trace.seek(0)
        turns: list[str] = []
        client, last = [], ""
        for line in trace:
            # A message's first line says who sent it; a statement's other
            # lines follow it unmarked.
            side = line[:1] if line[1:2] == "\t" and line[:1] in ("F", "B") else last
            if last == "F" and side == "B":
                turns.append("".join(client))
                client = []
            if side == "F":
                client.append(line)
            last = side
        return turns
