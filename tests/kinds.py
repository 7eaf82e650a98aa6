"""Job kinds used by the tests, loaded in processes via AWC_HANDLER_MODULES.

Handlers that leave a trace write to `test_ledger` in the job's own database
(through `DATABASE_URL`), so a test can prove from the database how many
times a job's side effect happened.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import psycopg
from pydantic import BaseModel, ConfigDict

from tick import Complete, Continue, Fail, JobContext, Retry, handler

_local = threading.local()

LEDGER_DDL = """
CREATE TABLE IF NOT EXISTS test_ledger (
    job_id   bigint NOT NULL,
    attempt  int NOT NULL,
    pid      int NOT NULL,
    lease_end timestamptz,
    at       timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS test_intervals (
    job_id   bigint NOT NULL,
    started  timestamptz NOT NULL,
    ended    timestamptz
);
CREATE TABLE IF NOT EXISTS test_units (
    job_id   bigint NOT NULL,
    unit     int NOT NULL,
    claim    uuid NOT NULL,
    saved    int,
    pid      int NOT NULL
)
"""


def _conn() -> psycopg.Connection[Any]:
    conn = getattr(_local, "conn", None)
    if conn is None or conn.closed:
        conn = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)
        _local.conn = conn
    return conn


def record(ctx: JobContext) -> None:
    """Append this run's side effect to the ledger."""
    _conn().execute(
        "INSERT INTO test_ledger (job_id, attempt, pid, lease_end) "
        "SELECT %s, %s, %s, locked_until FROM awc.jobs WHERE id = %s",
        (ctx.job_id, ctx.attempts, os.getpid(), ctx.job_id),
    )


class SleepPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seconds: float = 0.0


@handler("noop")
def noop(ctx: JobContext, payload: dict[str, Any]) -> None:
    return None


@handler("ledger")
def ledger(ctx: JobContext, payload: dict[str, Any]) -> dict[str, int]:
    record(ctx)
    return {"attempt": ctx.attempts}


@handler("sleep", payload=SleepPayload)
def sleep(ctx: JobContext, payload: SleepPayload) -> Complete:
    """Sleeps without looking at its context: an uncooperative handler."""
    record(ctx)
    time.sleep(payload.seconds)
    return Complete({"slept": payload.seconds})


@handler("patient", payload=SleepPayload)
def patient(ctx: JobContext, payload: SleepPayload) -> Complete:
    """Waits cooperatively: stops as soon as it is cancelled."""
    record(ctx)
    ctx.wait(payload.seconds)
    ctx.check()
    return Complete({"waited": payload.seconds})


@handler("kill_worker")
def kill_worker(ctx: JobContext, payload: dict[str, Any]) -> None:
    """A poison job: it kills the process running it, every time."""
    record(ctx)
    os.kill(os.getpid(), signal.SIGKILL)


@handler("retry")
def retry(ctx: JobContext, payload: dict[str, Any]) -> Retry:
    return Retry("try again later")


@handler("fail")
def fail(ctx: JobContext, payload: dict[str, Any]) -> Fail:
    return Fail("cannot ever work")


@handler("boom")
def boom(ctx: JobContext, payload: dict[str, Any]) -> None:
    raise RuntimeError("exploded")


class UnitsPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")
    units: int
    unit_secs: float


@handler("finisher", payload=UnitsPayload)
def finisher(ctx: JobContext, payload: UnitsPayload) -> dict[str, Any]:
    """Finishes what it started when the process stops, if the grace allows:
    checks with finish_on_stop, and reports what it saw of the stop."""
    record(ctx)
    seen: dict[str, Any] = {"stopping": False}
    for _ in range(payload.units):
        ctx.check(finish_on_stop=True)
        if ctx.stopping and not seen["stopping"]:
            seen = {"stopping": True, "cancelled": ctx.cancelled,
                    "remaining": round(ctx.remaining(), 2)}
        time.sleep(payload.unit_secs)
    return seen


@handler("hands_back", payload=UnitsPayload)
def hands_back(ctx: JobContext, payload: UnitsPayload) -> None:
    """Hands its job back at once when the process stops: plain check()."""
    record(ctx)
    for _ in range(payload.units):
        ctx.check()
        time.sleep(payload.unit_secs)


class UnitsPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")
    units: int
    per_claim: int = 0  # hand the rest on (Continue) after this many; 0: never
    unit_secs: float = 0.0  # each unit sleeps, deaf to cancellation
    checkpoint: bool = True


@handler("units", payload=UnitsPayload, lease_secs=60)
def units(ctx: JobContext, p: UnitsPayload) -> Any:
    """A long job in units (SPEC §17): resumes at what the last checkpoint
    saved; a unit counts as done (a `test_units` row) only once its
    checkpoint is durable, so the rows prove each unit was done once."""
    start = ctx.saved["next"] if ctx.saved else 0
    for done, unit in enumerate(range(start, p.units)):
        if p.per_claim and done == p.per_claim:
            return Continue(state={"next": unit, "pid": os.getpid()})
        time.sleep(p.unit_secs)
        if p.checkpoint:
            ctx.checkpoint({"next": unit + 1, "pid": os.getpid()}, progress=(unit + 1) / p.units)
        _conn().execute(
            "INSERT INTO test_units (job_id, unit, claim, saved, pid) VALUES (%s, %s, %s, %s, %s)",
            (ctx.job_id, unit, ctx.claim_token, start, os.getpid()))
    return {"units": p.units}


class TimedPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")
    secs: float = 0.1
    first_secs: float | None = None  # the first attempt's, if different


@handler("timed", payload=TimedPayload)
def timed(ctx: JobContext, p: TimedPayload) -> None:
    """Run for `secs`, recording when it ran by the database's clock
    (`test_intervals`), so a test can count how many ran at once."""
    conn = _conn()
    conn.execute("INSERT INTO test_intervals (job_id, started) VALUES (%s, clock_timestamp())",
                 (ctx.job_id,))
    secs = p.first_secs if p.first_secs is not None and ctx.attempts == 1 else p.secs
    time.sleep(secs)
    conn.execute("UPDATE test_intervals SET ended = clock_timestamp() "
                 "WHERE job_id = %s AND ended IS NULL", (ctx.job_id,))
