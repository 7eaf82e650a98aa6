"""Counting a connection's exchanges with the server: the round-trip
budgets the tests (and `bench.lambda_warm`) hold awc to (SPEC §6, §16)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg


def exchanges(conn: psycopg.Connection[Any], run: Callable[[], Any]) -> int:
    """How many exchanges `run()` has with the server on `conn`, from
    libpq's own trace of the connection: each turn from client messages (F)
    to the server's answers (B). Statements are not prepared meanwhile, since
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
        turns, last = 0, ""
        for line in trace:
            turns += last == "F" and line[:1] == "B"
            last = line[:1]
        return turns
