"""Job kinds for the lease and timeout tests (SPEC §26), loaded in `awc loop`
processes via AWC_HANDLER_MODULES beside tests.kinds.

They write what they saw to `test_lease_runs` through TEST_LEDGER_URL when
it is set (the test's database reached directly, so a test that cuts the
loop's own connections still sees the handler's side), else DATABASE_URL.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import psycopg
from pydantic import BaseModel, ConfigDict

from tick import Complete, JobContext, handler

LEASE_RUNS_DDL = """
CREATE TABLE IF NOT EXISTS test_lease_runs (
    job_id    bigint NOT NULL,
    attempt   int NOT NULL,
    pid       int NOT NULL,
    started   timestamptz NOT NULL DEFAULT clock_timestamp(),
    stopped   timestamptz,
    cancelled boolean,
    remaining float8
)
"""

_local = threading.local()


def _conn() -> psycopg.Connection[Any]:
    conn = getattr(_local, "conn", None)
    if conn is None or conn.closed:
        url = os.environ.get("TEST_LEDGER_URL") or os.environ["DATABASE_URL"]
        conn = psycopg.connect(url, autocommit=True)
        _local.conn = conn
    return conn


class WaitPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seconds: float = 0.0
    first_only: bool = False  # wait on the first attempt only; later ones return at once


def _started(ctx: JobContext) -> None:
    _conn().execute(
        "INSERT INTO test_lease_runs (job_id, attempt, pid, remaining) VALUES (%s, %s, %s, %s)",
        (ctx.job_id, ctx.attempts, os.getpid(), ctx.remaining()))


def _stopped(ctx: JobContext) -> None:
    _conn().execute(
        "UPDATE test_lease_runs SET stopped = clock_timestamp(), cancelled = %s "
        "WHERE job_id = %s AND attempt = %s", (ctx.cancelled, ctx.job_id, ctx.attempts))


@handler("long_sleep", payload=WaitPayload, timeout_secs=60)
def long_sleep(ctx: JobContext, payload: WaitPayload) -> Complete:
    """Runs past its lease and never heartbeats nor looks at its context."""
    _started(ctx)
    if not (payload.first_only and ctx.attempts > 1):
        time.sleep(payload.seconds)
    _stopped(ctx)
    return Complete({"slept": payload.seconds})


@handler("long_wait", payload=WaitPayload, timeout_secs=60)
def long_wait(ctx: JobContext, payload: WaitPayload) -> Complete:
    """Runs past its lease without heartbeats, stopping as soon as it is
    cancelled (`ctx.wait`, then `ctx.check()`)."""
    _started(ctx)
    if not (payload.first_only and ctx.attempts > 1):
        ctx.wait(payload.seconds)
    _stopped(ctx)
    ctx.check()
    return Complete({"waited": payload.seconds})
