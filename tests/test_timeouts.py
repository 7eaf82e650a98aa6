"""SPEC §26: a job's timeout apart from its lease, in one engine: the
handler's `timeout_secs`, the job's own at enqueue (either way), the tick's
deadline as the bound, heartbeats that do not push a declared timeout, and
the engine's renewals as one statement in one round trip."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from tests.exchanges import exchanges
from tests.support import job_row, run_awc
from tick import Complete, JobContext, handler, tick
from tick.engine.registry import Registry
from tick.producer import EnqueueError, enqueue, enqueue_many
from tick.queue import ClaimRequest, Writes, round_trip

pytestmark = pytest.mark.timeout(60)


def lease_left(conn: psycopg.Connection[Any], job_id: int) -> float:
    row = conn.execute("SELECT extract(epoch FROM locked_until - clock_timestamp())::float8 "
                       "FROM awc.jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return float(row[0])


def test_a_handlers_timeout_cuts_the_job_long_before_its_lease(
    conn: psycopg.Connection[Any]
) -> None:
    reg = Registry()
    seen: dict[str, float] = {}

    @handler("slow", timeout_secs=1.5, registry=reg)
    def slow(ctx: JobContext, payload: Any) -> None:
        seen["remaining"] = ctx.remaining()
        ctx.wait(30)
        ctx.check()

    job_id = enqueue(conn, "slow")
    began = time.monotonic()
    report = tick(conn, registry=reg, lease_secs=300, max_secs=20)
    assert time.monotonic() - began < 5
    assert seen["remaining"] <= 1.5
    assert report.retried == 1
    assert job_row(conn, job_id)["last_error"].startswith("DeadlineExceeded")


def test_a_jobs_timeout_overrides_its_handlers_in_either_direction(
    conn: psycopg.Connection[Any]
) -> None:
    reg = Registry()
    seen: dict[int, float] = {}

    @handler("timed", timeout_secs=100, registry=reg)
    def timed(ctx: JobContext, payload: Any) -> None:
        seen[ctx.job_id] = ctx.remaining()

    shorter = enqueue(conn, "timed", timeout_secs=2)
    longer = enqueue(conn, "timed", timeout_secs=1000)
    plain = enqueue(conn, "timed")
    tick(conn, registry=reg, lease_secs=30, max_secs=3600)
    assert 1 < seen[shorter] <= 2
    assert 900 < seen[longer] <= 1000
    assert 90 < seen[plain] <= 100


@pytest.mark.parametrize("claim", ["walk", "fair", "lane", "fair-short"])
def test_a_jobs_own_timeout_holds_whichever_claim_took_it(
    conn: psycopg.Connection[Any], claim: str
) -> None:
    """The job's own timeout was read back by the claim's start, `now()`:
    a job taken by the fair claim (it has a key, SPEC §23) or by the lanes
    (a limit on its kind, SPEC §18) is stamped at the claim's clock, and ran
    under its handler's timeout instead (an export given an hour was cut at
    its handler's minute, every attempt)."""
    reg = Registry()
    seen: dict[int, float] = {}

    @handler("timed", timeout_secs=100, registry=reg)
    def timed(ctx: JobContext, payload: Any) -> None:
        seen[ctx.job_id] = ctx.remaining()

    if claim == "lane":
        conn.execute("INSERT INTO awc.limits (scope, name, max_running) "
                     "VALUES ('kind', 'timed', 1)")
    keys = {"walk": (None, None), "lane": (None, None), "fair": ("tenant", "tenant"),
            "fair-short": ("zz-1", "zz-2")}[claim]
    if claim == "fair-short":  # many tenants: the fair claim's short form takes the last two
        for n in range(30):
            enqueue(conn, "timed", key=f"k{n:02d}")
    shorter = enqueue(conn, "timed", timeout_secs=2, key=keys[0])
    longer = enqueue(conn, "timed", timeout_secs=1000, key=keys[1])
    tick(conn, registry=reg, lease_secs=30, max_secs=3600,
         concurrency=2 if claim == "fair-short" else 4)
    assert 1 < seen[shorter] <= 2
    assert 900 < seen[longer] <= 1000


def test_the_ticks_deadline_bounds_a_longer_timeout(conn: psycopg.Connection[Any]) -> None:
    reg = Registry()
    seen: dict[str, float] = {}

    @handler("timed", timeout_secs=3600, registry=reg)
    def timed(ctx: JobContext, payload: Any) -> None:
        seen["remaining"] = ctx.remaining()

    enqueue(conn, "timed", timeout_secs=7200)
    tick(conn, registry=reg, lease_secs=30, max_secs=5)
    assert seen["remaining"] <= 5


def test_the_engine_renews_a_lease_the_handler_never_heartbeats(
    conn: psycopg.Connection[Any]
) -> None:
    reg = Registry()
    seen: list[float] = []

    @handler("quiet", registry=reg)
    def quiet(ctx: JobContext, payload: Any) -> Complete:
        for _ in range(20):  # 2 s: a lease of 1 s renewed along the way
            seen.append(lease_left(conn_probe, ctx.job_id))
            time.sleep(0.1)
        return Complete(None)

    conn_probe = psycopg.connect(conn.info.dsn, autocommit=True)
    try:
        job_id = enqueue(conn, "quiet", timeout_secs=10)
        report = tick(conn, registry=reg, lease_secs=1, max_secs=20)
    finally:
        conn_probe.close()
    assert report.completed == 1
    assert job_row(conn, job_id)["attempts"] == 1
    assert min(seen) > 0, "the lease lapsed while the job ran"
    # Renewed from a quarter spent while round trips go, at the latest at half.
    assert min(seen) >= 0.4


def test_without_a_timeout_the_lease_is_the_deadline_as_before(
    conn: psycopg.Connection[Any]
) -> None:
    reg = Registry()
    seen: dict[str, Any] = {}

    @handler("beats", registry=reg)
    def beats(ctx: JobContext, payload: Any) -> None:
        seen["before"] = ctx.remaining()
        time.sleep(0.5)
        seen["lease_end"] = ctx.heartbeat()
        seen["after"] = ctx.remaining()

    enqueue(conn, "beats")
    tick(conn, registry=reg, lease_secs=4, max_secs=20)
    assert seen["before"] <= 4
    assert seen["after"] > 3.4  # pushed back by one lease
    assert isinstance(seen["lease_end"], datetime)
    assert 3 < (seen["lease_end"] - datetime.now(UTC)).total_seconds() <= 4


def test_a_heartbeat_renews_but_never_pushes_a_declared_timeout(
    conn: psycopg.Connection[Any]
) -> None:
    reg = Registry()
    seen: dict[str, Any] = {}

    @handler("beats", timeout_secs=2, registry=reg)
    def beats(ctx: JobContext, payload: Any) -> None:
        seen["before"] = ctx.remaining()
        time.sleep(0.5)
        seen["lease_end"] = ctx.heartbeat()
        seen["after"] = ctx.remaining()

    job_id = enqueue(conn, "beats")
    tick(conn, registry=reg, lease_secs=30, max_secs=60)
    assert seen["after"] < seen["before"] - 0.4
    assert 25 < (seen["lease_end"] - datetime.now(UTC)).total_seconds() <= 30
    assert job_row(conn, job_id)["state"] == "COMPLETED"


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), 604801, True, "60"])
def test_a_timeout_out_of_bounds_is_refused_by_name(
    conn: psycopg.Connection[Any], bad: Any
) -> None:
    with pytest.raises(EnqueueError, match="timeout_secs"):
        enqueue(conn, "noop", timeout_secs=bad)
    with pytest.raises(EnqueueError, match="job 0: timeout_secs"):
        enqueue_many(conn, [{"kind": "noop", "timeout_secs": bad}])
    with pytest.raises(ValueError, match="timeout_secs"):
        handler("noop", timeout_secs=bad, registry=Registry())


def test_plain_sql_and_copy_carry_a_timeout_and_the_column_refuses_nan(
    conn: psycopg.Connection[Any]
) -> None:
    conn.execute("INSERT INTO awc.jobs (kind, timeout_secs) VALUES ('noop', 90)")
    ids = enqueue_many(conn, [{"kind": "noop", "timeout_secs": 7.5}] * 70)  # by COPY
    rows = conn.execute("SELECT timeout_secs, count(*) FROM awc.jobs GROUP BY 1 ORDER BY 1"
                        ).fetchall()
    assert rows == [(7.5, 70), (90.0, 1)] and len(ids) == 70
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("INSERT INTO awc.jobs (kind, timeout_secs) VALUES ('noop', 'NaN')")


def test_awc_enqueue_timeout_is_checked_and_stored(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    done = run_awc(awc_env, "enqueue", "noop", "--timeout", "0")
    assert done.returncode == 2 and "--timeout" in done.stderr
    assert "Traceback" not in done.stderr
    done = run_awc(awc_env, "enqueue", "noop", "--timeout", "45")
    assert done.returncode == 0, done.stderr
    assert job_row(conn, int(done.stdout))["timeout_secs"] == 45.0
    shown = run_awc(awc_env, "jobs", "show", done.stdout.strip())
    assert json.loads(shown.stdout)["timeout_secs"] == 45.0


def test_a_thousand_running_leases_are_renewed_in_one_round_trip(
    conn: psycopg.Connection[Any]
) -> None:
    enqueue_many(conn, [{"kind": "noop"}] * 1000)
    request = ClaimRequest(slots=[f"w-{n}" for n in range(1000)], lease_secs=5, cap_secs=5,
                           leases_json="{}", kinds=None, queues=None)
    claimed = round_trip(conn, Writes(), request).claimed
    assert len(claimed) == 1000
    renewals = Writes(renewals=[(row.id, row.token, 60.0) for row in claimed])
    result: dict[str, Any] = {}
    count = exchanges(conn, lambda: result.update(done=round_trip(conn, renewals, None)))
    assert count == 1
    assert len(result["done"].extended) == 1000
    row = conn.execute("SELECT min(locked_until - now()) > interval '50 seconds' "
                       "FROM awc.jobs").fetchone()
    assert row == (True,)


def test_a_claim_reads_the_timeouts_of_the_jobs_it_took_only(
    conn: psycopg.Connection[Any]
) -> None:
    with_one = enqueue(conn, "noop", timeout_secs=30)
    enqueue(conn, "noop")
    request = ClaimRequest(slots=["a-1", "a-2"], lease_secs=5, cap_secs=5, leases_json="{}",
                           kinds=None, queues=None)
    done = round_trip(conn, Writes(), request)
    assert len(done.claimed) == 2
    assert done.timeouts == {with_one: 30.0}


def test_a_tick_that_drains_after_a_jobs_own_timeout_says_drained(
    conn: psycopg.Connection[Any]
) -> None:
    """A job cut at its own timeout (1 s, under a handler of 30) made the
    report say `deadline` for a tick that drained in a second, its own
    budget of 20 s far off."""
    reg = Registry()

    @handler("deaf", timeout_secs=30, registry=reg)
    def deaf(ctx: JobContext, payload: Any) -> None:
        time.sleep(3)

    enqueue(conn, "deaf", timeout_secs=1)
    report = tick(conn, registry=reg, lease_secs=30, max_secs=20)
    assert report.retried == 1
    assert report.stop_reason == "drained"
