"""SPEC §5, §6: tick() outcomes, retries, deadlines, fencing, no head-of-line blocking."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest
from pydantic import BaseModel, ConfigDict

from tests.support import job_row, registry_with
from tick import Complete, Fail, JobContext, LeaseLost, Retry, tick
from tick.admin import cancel
from tick.db import connect
from tick.engine.registry import Registry, handler
from tick.maintenance import prune, rescue
from tick.producer import enqueue, enqueue_many
from tick.queue import ClaimRequest, Writes, round_trip


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int


def run_tick(conn: psycopg.Connection[Any], reg: Registry, **kw: Any) -> Any:
    kw.setdefault("max_secs", 30)
    return tick(conn, registry=reg, **kw)


class TickInBackground:
    """A tick on its own thread, so a test can act while a handler runs."""

    def __init__(self, conn: psycopg.Connection[Any], reg: Registry) -> None:
        self._result: list[Any] = []
        self._thread = threading.Thread(
            target=lambda: self._result.append(run_tick(conn, reg)))
        self._thread.start()

    def report(self) -> Any:
        self._thread.join(20)
        (report,) = self._result
        return report


def test_tick_completes_jobs_and_stores_results(conn: psycopg.Connection[Any]) -> None:
    reg = registry_with(double=lambda ctx, p: {"twice": p["n"] * 2}, none=lambda ctx, p: None)
    a = enqueue(conn, "double", {"n": 21})
    b = enqueue(conn, "none")
    report = run_tick(conn, reg)
    assert (report.claimed, report.completed, report.stop_reason) == (2, 2, "drained")
    assert job_row(conn, a)["result"] == {"twice": 42}
    job = job_row(conn, b)
    assert job["state"] == "COMPLETED" and job["result"] is None
    assert job["finished_at"] is not None and job["locked_until"] is None
    assert set(report.as_dict()) == {
        "claimed", "completed", "retried", "failed", "cancelled", "released", "discarded",
        "continued", "rescued", "pruned", "fired", "stop_reason", "duration_s"}  # SPEC §6, §17


def test_retry_is_rescheduled_within_base_and_twice_base(conn: psycopg.Connection[Any]) -> None:
    reg = registry_with(flaky=lambda ctx, p: Retry("not yet"))
    job_id = enqueue(conn, "flaky")
    for attempt, base in ((1, 5), (2, 10), (3, 20)):
        report = run_tick(conn, reg)
        assert report.retried == 1
        delay = conn.execute(
            "SELECT extract(epoch FROM run_at - updated_at) FROM awc.jobs WHERE id = %s",
            (job_id,)).fetchone()
        assert delay is not None and base <= float(delay[0]) <= 2 * base
        job = job_row(conn, job_id)
        assert (job["state"], job["attempts"]) == ("PENDING", attempt)
        assert job["last_error"] == "Retry: not yet"
        conn.execute("UPDATE awc.jobs SET run_at = now()")


def test_retry_at_max_attempts_is_a_dead_letter(conn: psycopg.Connection[Any]) -> None:
    reg = registry_with(flaky=lambda ctx, p: Retry("again"))
    job_id = enqueue(conn, "flaky", max_attempts=2)
    assert run_tick(conn, reg).retried == 1
    conn.execute("UPDATE awc.jobs SET run_at = now()")
    report = run_tick(conn, reg)
    assert (report.retried, report.failed) == (0, 1)
    job = job_row(conn, job_id)
    assert (job["state"], job["attempts"]) == ("FAILED", 2)
    assert run_tick(conn, reg).claimed == 0


def test_fail_is_never_retried(conn: psycopg.Connection[Any]) -> None:
    reg = registry_with(doomed=lambda ctx, p: Fail("bad input"))
    job_id = enqueue(conn, "doomed", max_attempts=5)
    assert run_tick(conn, reg).failed == 1
    job = job_row(conn, job_id)
    assert (job["state"], job["attempts"], job["last_error"]) == ("FAILED", 1, "Fail: bad input")
    assert run_tick(conn, reg).claimed == 0


def test_uncaught_exception_is_a_retry_named_by_its_class(conn: psycopg.Connection[Any]) -> None:
    def boom(ctx: JobContext, p: Any) -> None:
        raise KeyError("x" * 2000)

    job_id = enqueue(conn, "boom")
    assert run_tick(conn, registry_with(boom=boom)).retried == 1
    error = job_row(conn, job_id)["last_error"]
    assert error.startswith("KeyError: ") and len(error) <= len("KeyError: ") + 500


def test_unknown_kind_and_malformed_payload_are_dead_lettered(
    conn: psycopg.Connection[Any],
) -> None:
    reg = Registry()
    handler("typed", payload=Item, registry=reg)(lambda ctx, p: {"n": p.n})
    unknown = enqueue(conn, "nobody-handles-this")
    malformed = enqueue(conn, "typed", {"n": "secret-value", "extra": 1})
    good = enqueue(conn, "typed", {"n": 3})
    report = run_tick(conn, reg)
    assert (report.failed, report.completed) == (2, 1)
    assert job_row(conn, unknown)["last_error"].startswith("UnknownKind: ")
    error = job_row(conn, malformed)["last_error"]
    assert error.startswith("ValidationError: ") and "n:" in error
    assert "(key): Extra inputs" in error  # a key of the payload's own, not named
    assert "secret-value" not in error  # the payload stays out of errors
    assert job_row(conn, malformed)["attempts"] == 1
    assert job_row(conn, good)["result"] == {"n": 3}


def test_a_result_that_is_not_json_is_a_fail(conn: psycopg.Connection[Any]) -> None:
    reg = registry_with(odd=lambda ctx, p: {"when": object()}, nan=lambda ctx, p: float("nan"),
                       ok=lambda ctx, p: 1)
    ids = [enqueue(conn, k) for k in ("odd", "nan", "ok")]
    report = run_tick(conn, reg)
    assert (report.failed, report.completed) == (2, 1)
    assert [job_row(conn, i)["state"] for i in ids] == ["FAILED", "FAILED", "COMPLETED"]


def test_deadline_cuts_a_long_job_and_returns_on_time(conn: psycopg.Connection[Any]) -> None:
    def slow(ctx: JobContext, p: Any) -> None:
        time.sleep(30)  # ignores its context on purpose

    job_id = enqueue(conn, "slow")
    began = time.monotonic()
    report = run_tick(conn, registry_with(slow=slow), max_secs=3)
    took = time.monotonic() - began
    assert took < 3.5
    assert (report.claimed, report.retried, report.stop_reason) == (1, 1, "deadline")
    job = job_row(conn, job_id)
    assert job["state"] == "PENDING" and job["last_error"] == "DeadlineExceeded: deadline exceeded"
    assert job["attempts"] == 1


def test_a_job_cut_at_the_deadline_reports_how_long_it_ran(
        conn: psycopg.Connection[Any]) -> None:
    # Its job event (and the duration histogram, Lambda's JobDuration) said
    # 0 s: only a slot whose handler returned set the duration.
    from tick.engine.spec import NullObserver

    class Seen(NullObserver):
        def __init__(self) -> None:
            self.durations: list[float] = []

        def processed(self, events: list[Any]) -> None:
            self.durations.extend(e.duration_s for e in events)

    def slow(ctx: JobContext, p: Any) -> None:
        time.sleep(30)  # ignores its context on purpose

    enqueue(conn, "slow")
    seen = Seen()
    report = run_tick(conn, registry_with(slow=slow), max_secs=2, observer=seen)
    assert report.retried == 1
    assert len(seen.durations) == 1 and 1.0 < seen.durations[0] < 3.0, seen.durations


def test_lease_is_never_claimed_past_the_tick_deadline(conn: psycopg.Connection[Any]) -> None:
    seen: list[float] = []

    def probe(ctx: JobContext, p: Any) -> None:
        seen.append(ctx.remaining())
        with connect(conn.info.dsn) as c:
            row = c.execute("SELECT extract(epoch FROM locked_until) FROM awc.jobs").fetchone()
            assert row is not None
            seen.append(float(row[0]))

    enqueue(conn, "probe")
    started = time.time()
    run_tick(conn, registry_with(probe=probe), max_secs=4, lease_secs=300)
    remaining, lease_end = seen
    assert remaining <= 4
    assert lease_end <= started + 4 + 0.5  # SPEC §6: lease end <= deadline + 5 s


def test_a_cooperative_handler_sees_its_deadline(conn: psycopg.Connection[Any]) -> None:
    def polite(ctx: JobContext, p: Any) -> None:
        while True:
            ctx.check()
            time.sleep(0.05)

    job_id = enqueue(conn, "polite")
    report = run_tick(conn, registry_with(polite=polite), max_secs=2)
    assert report.retried == 1
    assert job_row(conn, job_id)["last_error"] == "DeadlineExceeded: deadline exceeded"


def test_stale_holders_outcome_is_discarded(db_url: str, conn: psycopg.Connection[Any]) -> None:
    entered, release = threading.Event(), threading.Event()

    def held(ctx: JobContext, p: Any) -> dict[str, str]:
        entered.set()
        release.wait(20)
        return {"by": "stale"}

    job_id = enqueue(conn, "held")
    running = TickInBackground(conn, registry_with(held=held))
    assert entered.wait(10)
    with connect(db_url) as other:
        # Its lease lapses; another worker rescues, claims and completes it.
        other.execute("UPDATE awc.jobs SET locked_until = now() - interval '1 second'")
        assert rescue(other) == (1, 0)
        request = ClaimRequest(["other-1"], 60, 60, "{}", None, None)
        (row,) = round_trip(other, Writes(), request).claimed
        writes = Writes()
        writes.complete.append((row.id, row.token, '{"by": "fresh"}'))
        round_trip(other, writes, None)
    release.set()
    report = running.report()
    assert (report.discarded, report.completed) == (1, 0)
    job = job_row(conn, job_id)
    assert job["result"] == {"by": "fresh"} and job["attempts"] == 2


def test_cancel_of_a_running_job_discards_its_outcome(
    db_url: str, conn: psycopg.Connection[Any]
) -> None:
    entered = threading.Event()
    saw_cancel: list[bool] = []

    def held(ctx: JobContext, p: Any) -> dict[str, str]:
        entered.set()
        saw_cancel.append(ctx.wait(20))
        return {"late": "write"}

    job_id = enqueue(conn, "held")
    running = TickInBackground(conn, registry_with(held=held))
    assert entered.wait(10)
    with connect(db_url) as operator:
        cancel(operator, job_id)
    report = running.report()
    assert saw_cancel == [True]  # the fence check told the handler
    assert (report.cancelled, report.completed) == (1, 0)
    job = job_row(conn, job_id)
    assert job["state"] == "CANCELLED" and job["result"] is None


def test_heartbeat_extends_the_lease(conn: psycopg.Connection[Any]) -> None:
    leases: list[float] = []

    def long_job(ctx: JobContext, p: Any) -> None:
        with connect(conn.info.dsn) as c:
            def lease() -> float:
                row = c.execute("SELECT extract(epoch FROM locked_until) FROM awc.jobs").fetchone()
                assert row is not None
                return float(row[0])
            leases.append(lease())
            time.sleep(1.1)
            ctx.heartbeat()
            leases.append(lease())

    enqueue(conn, "long_job")
    report = run_tick(conn, registry_with(long_job=long_job), lease_secs=5, max_secs=30)
    assert report.completed == 1
    assert leases[1] > leases[0] + 1


def test_heartbeat_after_cancel_raises_lease_lost(
    db_url: str, conn: psycopg.Connection[Any]
) -> None:
    raised: list[str] = []

    def victim(ctx: JobContext, p: Any) -> None:
        with connect(db_url) as operator:
            cancel(operator, ctx.job_id)
        try:
            ctx.heartbeat()
        except LeaseLost:
            raised.append("lost")
            raise

    job_id = enqueue(conn, "victim")
    report = run_tick(conn, registry_with(victim=victim))
    assert raised == ["lost"]
    assert report.cancelled == 1
    assert job_row(conn, job_id)["state"] == "CANCELLED"


def test_a_slow_job_does_not_hold_back_the_others(conn: psycopg.Connection[Any]) -> None:
    finished: dict[str, float] = {}

    def slow(ctx: JobContext, p: Any) -> None:
        time.sleep(2)
        finished["slow"] = time.monotonic()

    def fast(ctx: JobContext, p: Any) -> None:
        finished.setdefault("fast", 0)
        finished["fast_last"] = time.monotonic()

    enqueue(conn, "slow", priority=1)
    enqueue_many(conn, [{"kind": "fast"}] * 30)
    report = run_tick(conn, registry_with(slow=slow, fast=fast), concurrency=2)
    assert report.completed == 31
    assert finished["fast_last"] < finished["slow"]


def test_max_jobs_bounds_the_tick(conn: psycopg.Connection[Any]) -> None:
    enqueue_many(conn, [{"kind": "noop"}] * 10)
    report = run_tick(conn, registry_with(noop=lambda c, p: None), max_jobs=4, concurrency=3)
    assert (report.claimed, report.completed, report.stop_reason) == (4, 4, "max_jobs")


def test_kind_and_queue_filters_narrow_the_claim(conn: psycopg.Connection[Any]) -> None:
    reg = registry_with(a=lambda c, p: None, b=lambda c, p: None)
    enqueue(conn, "a")
    enqueue(conn, "b")
    enqueue(conn, "a", queue="bulk")
    assert run_tick(conn, reg, kinds=["b"]).completed == 1
    assert run_tick(conn, reg, queues=["bulk"]).completed == 1
    left = conn.execute("SELECT kind, queue FROM awc.jobs WHERE state = 'PENDING'").fetchall()
    assert left == [("a", "default")]


def test_handler_lease_overrides_the_default(conn: psycopg.Connection[Any]) -> None:
    reg = Registry()
    leases: list[float] = []

    def probe(ctx: JobContext, p: Any) -> None:
        leases.append(ctx.remaining())

    handler("probe", lease_secs=7, registry=reg)(probe)
    enqueue(conn, "probe")
    run_tick(conn, reg, lease_secs=300, max_secs=50)
    assert 5 < leases[0] <= 7


def test_tick_rescues_expired_leases_first(conn: psycopg.Connection[Any]) -> None:
    job_id = enqueue(conn, "noop")
    conn.execute(
        "UPDATE awc.jobs SET state = 'RUNNING', attempts = 1, claim_token = gen_random_uuid(), "
        "locked_until = now() - interval '1 minute'")
    report = run_tick(conn, registry_with(noop=lambda c, p: None))
    assert (report.rescued, report.completed) == (1, 1)
    assert job_row(conn, job_id)["attempts"] == 2


def test_prune_deletes_only_old_finished_jobs_once_an_hour(conn: psycopg.Connection[Any]) -> None:
    ids = {}
    for state in ("COMPLETED", "CANCELLED", "FAILED", "PENDING", "RUNNING"):
        ids[state] = enqueue(conn, "noop")
        conn.execute(
            "UPDATE awc.jobs SET state = %s, finished_at = now() - interval '8 days' "
            "WHERE id = %s", (state, ids[state]))
    recent = enqueue(conn, "noop")
    conn.execute("UPDATE awc.jobs SET state = 'COMPLETED', finished_at = now() WHERE id = %s",
                 (recent,))
    assert prune(conn, after_secs=7 * 86400) == 2
    left = {r[0] for r in conn.execute("SELECT id FROM awc.jobs").fetchall()}
    assert left == {ids["FAILED"], ids["PENDING"], ids["RUNNING"], recent}
    # Done for the hour: a second pass, even with new old rows, does nothing.
    conn.execute("UPDATE awc.jobs SET finished_at = now() - interval '8 days' WHERE id = %s",
                 (recent,))
    assert prune(conn, after_secs=7 * 86400) == 0
    assert prune(conn, after_secs=7 * 86400, force=True) == 1


@pytest.mark.parametrize("concurrency", [1, 8])
def test_every_job_completes_exactly_once(conn: psycopg.Connection[Any], concurrency: int) -> None:
    seen: list[int] = []
    lock = threading.Lock()

    def count(ctx: JobContext, p: Any) -> Complete:
        with lock:
            seen.append(ctx.job_id)
        return Complete()

    ids = enqueue_many(conn, [{"kind": "count"}] * 300)
    report = run_tick(conn, registry_with(count=count), max_jobs=1000, concurrency=concurrency)
    assert report.completed == 300
    assert sorted(seen) == sorted(ids)
    done = conn.execute("SELECT count(*) FROM awc.jobs WHERE state = 'COMPLETED'").fetchone()
    assert done == (300,)


def test_after_the_stop_grace_a_job_is_released_and_its_handler_refused(
    conn: psycopg.Connection[Any],
) -> None:
    from tick.engine.api import Engine, RunSpec

    refused: list[str] = []
    entered = threading.Event()

    def stubborn(ctx: JobContext, p: Any) -> dict[str, bool]:
        entered.set()
        time.sleep(1.5)  # ignores the stop and outlives the grace
        try:
            ctx.heartbeat()
        except LeaseLost:
            refused.append("heartbeat")
        return {"late": True}

    job_id = enqueue(conn, "stubborn")
    stop = threading.Event()
    engine = Engine(lambda: conn, registry=registry_with(stubborn=stubborn))
    spec = RunSpec(continuous=True, stop_grace_secs=0.5, poll_interval_s=0.1)
    threading.Thread(target=lambda: (entered.wait(10), stop.set())).start()
    report = engine.run(spec, stop)
    assert (report.released, report.stop_reason) == (1, "stopped")
    job = job_row(conn, job_id)
    assert (job["state"], job["attempts"], job["result"]) == ("PENDING", 0, None)
    wait_for_list = time.monotonic() + 5
    while not refused and time.monotonic() < wait_for_list:
        time.sleep(0.05)
    assert refused == ["heartbeat"]
    assert job_row(conn, job_id)["result"] is None  # its late outcome was dropped


class Tagged(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int
    tags: dict[str, int] = {}


def test_a_payload_error_names_the_model_s_fields_never_the_payload_s_own_keys(
    conn: psycopg.Connection[Any],
) -> None:
    # SPEC §3: a payload never reaches a message. A key of the payload's own
    # (a mapping's key, a field the model does not have) is payload content:
    # it is named by its place, not its text; the model's own fields by name.
    reg = Registry()
    handler("tagged", payload=Tagged, registry=reg)(lambda ctx, p: None)
    keyed = enqueue(conn, "tagged", {"n": "x", "tags": {"alice@example.com": "secret-1"},
                                     "\x1b]0;pwned\x07": 1, "extra": 2})
    many = enqueue(conn, "tagged", {"n": 1, "tags": {f"k{i}": "v" for i in range(50_000)}})
    assert run_tick(conn, reg).failed == 2
    error = job_row(conn, keyed)["last_error"]
    assert error.startswith("ValidationError: ") and "n: " in error, error
    for leaked in ("alice", "secret-1", "pwned", "\x1b", "extra"):
        assert leaked not in error, (leaked, error)
    assert "tags.(key)" in error and "(key): Extra inputs" in error, error
    error = job_row(conn, many)["last_error"]
    assert "and 49,997 more" in error, error
    assert "k10" not in error
