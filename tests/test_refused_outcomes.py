"""SPEC §4.2 "One bad outcome sinks nothing else", §6.1: whatever a handler
returns or raises, its job gets an outcome naming the problem, the outcomes
batched with it are recorded, and the tick never waits for its deadline."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import psycopg
import pytest

from tests.support import job_row, nested
from tick import Complete, Retry, tick
from tick.engine.registry import Registry, handler
from tick.producer import enqueue, enqueue_many


def registry_with(**fns: Any) -> Registry:
    reg = Registry()
    for kind, fn in fns.items():
        handler(kind, registry=reg)(fn)
    return reg


def test_a_lone_surrogate_fails_its_own_job_and_the_batch_is_recorded(
    conn: psycopg.Connection[Any],
) -> None:
    # Badly decoded file names: a lone surrogate in a result and in an error.
    reg = registry_with(
        good=lambda ctx, p: {"n": p["n"]},
        bad_result=lambda ctx, p: {"name": "report-\udcff.csv"},
        bad_error=lambda ctx, p: Retry("cannot open \udcff\x00 file"),
    )
    jobs = [{"kind": "good", "payload": {"n": n}} for n in range(6)]
    jobs[2:2] = [{"kind": "bad_result"}, {"kind": "bad_error", "max_attempts": 1}]
    ids = enqueue_many(conn, jobs)
    report = tick(conn, registry=reg, concurrency=8, max_secs=30)
    assert report.completed == 6 and report.failed == 2 and report.stop_reason == "drained"
    bad_result, bad_error = job_row(conn, ids[2]), job_row(conn, ids[3])
    assert bad_result["state"] == "FAILED"
    assert "lone surrogate" in bad_result["last_error"]
    assert bad_error["state"] == "FAILED"
    assert bad_error["last_error"] == "Retry: cannot open \\udcff file"
    for job_id in ids[:2] + ids[4:]:
        assert job_row(conn, job_id)["state"] == "COMPLETED"


def test_an_outcome_the_database_refuses_fails_alone(conn: psycopg.Connection[Any]) -> None:
    # Any refusal, not only the ones awc can foresee: here a constraint the
    # operator added. The batch write fails; the engine records each outcome
    # apart and fails only the refused one, naming the refusal.
    conn.execute("ALTER TABLE awc.jobs ADD CONSTRAINT no_poison "
                 "CHECK (result IS NULL OR NOT result ? 'poison')")
    reg = registry_with(job=lambda ctx, p: p)
    ids = enqueue_many(conn, [{"kind": "job", "payload": {"n": n}} for n in range(4)]
                       + [{"kind": "job", "payload": {"poison": True}}])
    report = tick(conn, registry=reg, concurrency=8, max_secs=30)
    assert report.completed == 4 and report.failed == 1
    poisoned = job_row(conn, ids[-1])
    assert poisoned["state"] == "FAILED" and poisoned["result"] is None
    assert poisoned["last_error"].startswith("OutcomeRefused: the database refused this job's "
                                             "outcome (CheckViolation")
    assert all(job_row(conn, i)["result"] == {"n": n} for n, i in enumerate(ids[:4]))


@pytest.mark.parametrize("raised", [SystemExit(3), KeyboardInterrupt(), GeneratorExit()])
def test_a_handler_that_raises_a_base_exception_is_retried_at_once(
    conn: psycopg.Connection[Any], raised: BaseException
) -> None:
    def handler_fn(ctx: Any, payload: Any) -> None:
        raise raised

    reg = registry_with(exits=handler_fn, fine=lambda ctx, p: None)
    first = enqueue(conn, "exits", max_attempts=3)
    enqueue(conn, "fine")
    began = time.monotonic()
    report = tick(conn, registry=reg, concurrency=1, max_secs=30)
    assert time.monotonic() - began < 10  # the slot lived on: no wait for the deadline
    assert report.retried == 1 and report.completed == 1 and report.stop_reason == "drained"
    job = job_row(conn, first)
    assert job["state"] == "PENDING" and job["last_error"].startswith(type(raised).__name__)


@pytest.mark.parametrize(
    ("value", "state", "error"),
    [
        (Retry(ValueError("disk full")), "PENDING", "ValueError: disk full"),
        (nested(sys.getrecursionlimit() + 100), "FAILED", "ValueError: result is nested too "),
        (Complete({1j: 2}), "FAILED", "ValueError: result is not JSON: keys must be"),
        ({"n": float("nan")}, "FAILED", "ValueError: result holds NaN or an infinite number"),
        ({"n": "\x00"}, "FAILED", "ValueError: result contains a NUL"),
    ],
)
def test_a_value_that_cannot_become_an_outcome_is_recorded_at_once(
    conn: psycopg.Connection[Any], value: Any, state: str, error: str
) -> None:
    reg = registry_with(odd=lambda ctx, p: value, fine=lambda ctx, p: None)
    odd = enqueue(conn, "odd")
    enqueue(conn, "fine")
    began = time.monotonic()
    report = tick(conn, registry=reg, concurrency=1, max_secs=30)
    assert time.monotonic() - began < 10
    assert report.stop_reason == "drained" and report.completed == 1
    job = job_row(conn, odd)
    assert job["state"] == state and job["last_error"].startswith(error), job["last_error"]


def test_an_escaped_backslash_before_u0000_is_not_a_nul(conn: psycopg.Connection[Any]) -> None:
    reg = registry_with(path=lambda ctx, p: {"path": "C:\\u0000dir"})
    job_id = enqueue(conn, "path")
    assert tick(conn, registry=reg, max_secs=30).completed == 1
    assert job_row(conn, job_id)["result"] == {"path": "C:\\u0000dir"}


def test_a_payload_nested_too_deep_to_decode_is_a_fail(conn: psycopg.Connection[Any]) -> None:
    # jsonb nests deeper than Python decodes: a Retry could never succeed.
    reg = registry_with(deep=lambda ctx, p: None)
    depth = sys.getrecursionlimit() * 3
    job_id = conn.execute(
        "INSERT INTO awc.jobs (kind, payload) VALUES ('deep', %s::jsonb) RETURNING id",
        ('{"a":' + "[" * depth + "]" * depth + "}",)).fetchone()[0]
    report = tick(conn, registry=reg, max_secs=30)
    assert report.failed == 1
    row = conn.execute("SELECT state, last_error FROM awc.jobs WHERE id = %s",
                       (job_id,)).fetchone()
    assert row == ("FAILED", "PayloadError: payload is nested too deeply to decode")


def test_a_payload_with_an_integer_too_long_to_decode_is_a_fail(
    conn: psycopg.Connection[Any],
) -> None:
    """jsonb stores an integer of any length; Python converts at most 4,300
    digits: such a row (written by plain SQL) was retried until its attempts
    ran out, as if the next try could decode it."""
    job = enqueue(conn, "good")
    conn.execute("UPDATE awc.jobs SET payload = ('{\"n\": ' || repeat('9', 5000) || '}')::jsonb "
                 "WHERE id = %s", (job,))
    report = tick(conn, registry=registry_with(good=lambda ctx, p: {}), max_secs=30)
    assert report.failed == 1 and report.retried == 0
    row = conn.execute("SELECT state, attempts, last_error FROM awc.jobs").fetchone()
    assert row == ("FAILED", 1, "PayloadError: payload holds a number too long to decode")


def test_enqueue_names_an_integer_of_too_many_digits() -> None:
    from tick.errors import EnqueueError
    from tick.payloads import payload_json

    with pytest.raises(EnqueueError, match="holds an integer of too many digits"):
        payload_json({"n": 10**5000})


def test_a_job_of_an_unknown_kind_lags_by_its_wait_not_the_hosts_uptime(
    conn: psycopg.Connection[Any],
) -> None:
    """A job that never reached a slot has no start: its lag was the
    monotonic clock itself (the host's uptime), and fired lag alerts."""
    from tick.engine.spec import NullObserver

    seen: list[Any] = []

    class Watch(NullObserver):
        def processed(self, events: list[Any]) -> None:
            seen.extend(events)

    enqueue(conn, "no_such_kind")
    report = tick(conn, registry=registry_with(good=lambda ctx, p: {}), max_secs=30,
                  observer=Watch())
    assert report.failed == 1
    (event,) = seen
    assert event.kind == "no_such_kind" and 0 <= event.lag_s < 60, event


@pytest.mark.parametrize(("error", "own"), [
    (psycopg.errors.CheckViolation(), True),
    (psycopg.errors.UntranslatableCharacter(), True),
    (psycopg.errors.ProgramLimitExceeded(), True),
    (psycopg.errors.RaiseException(), True),
    (psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes"), True),
    (UnicodeEncodeError("utf-8", "\udcff", 0, 1, "surrogates not allowed"), True),
    (psycopg.errors.InvalidSqlStatementName(), False),
    (psycopg.errors.DuplicatePreparedStatement(), False),
    (psycopg.errors.LockNotAvailable(), False),
    (psycopg.errors.DeadlockDetected(), False),
    (psycopg.errors.InsufficientPrivilege(), False),
    (psycopg.errors.QueryCanceled(), False),
    (psycopg.errors.DiskFull(), False),
])
def test_only_a_refusal_of_the_rows_values_is_its_own(error: BaseException, own: bool) -> None:
    """docs/decisions/0036: sent alone, an outcome that meets any other
    refusal raises it as the batch's, and no job is failed for it."""
    from tick.faults import row_fault

    assert row_fault(error) is own


def test_an_outcome_a_lock_kept_out_for_a_moment_is_recorded(db_url: str) -> None:
    """docs/decisions/0036: a refusal that is not the row's own (here a lock
    timeout: another session holds the job's row a moment) neither fails
    the job nor ends the run with its batch unrecorded: the rest of the
    batch is recorded, and the outcome kept out is sent again after a
    pause."""
    from tick.db import connect
    from tick.engine.spec import RunSpec

    def held(ctx: Any, payload: Any) -> dict[str, bool]:
        _hold_row(db_url, ctx.job_id, 0.15)  # the row is held as the outcome is sent
        return {"held": True}

    with connect(db_url) as conn:
        ids = enqueue_many(conn, [{"kind": "quiet"}] * 3 + [{"kind": "held"}])
        engine = _locked_engine(db_url, registry_with(
            quiet=lambda ctx, p: {"quiet": True}, held=held), _Logged())
        try:
            report = engine.run(RunSpec(deadline=time.monotonic() + 30, concurrency=4))
        finally:
            engine.close()
        assert (report.completed, report.failed) == (4, 0)
        rows = conn.execute("SELECT state, attempts FROM awc.jobs WHERE id = ANY(%s)",
                            (ids,)).fetchall()
    assert rows == [("COMPLETED", 1)] * 4


@pytest.mark.parametrize("code", ["query_canceled", "disk_full", "out_of_memory",
                                  "configuration_limit_exceeded"])
def test_a_claim_cancelled_after_a_refused_batch_ends_no_running_job(
    db_url: str, code: str,
) -> None:
    """docs/decisions/0036: a claim the server cancels, or refuses short of
    disk, memory or temp_file_limit (here a trigger of the operator's raising
    it on every claimed row) after a refused batch ended the run, and the
    job still running was left to its lease (with one attempt, FAILED
    `LeaseExpired` though it succeeded; a full disk ran 80 finished jobs
    twice). That turn claims nothing; the running job is recorded; and the
    run claims again a moment later (taken for a short claim, the refusal
    ended a tick `drained` with thousands of jobs ready)."""
    from tick.db import connect
    from tick.engine.api import Engine
    from tick.engine.spec import RunSpec

    def cancel_claims(ctx: Any, payload: Any) -> None:
        with psycopg.connect(db_url, autocommit=True) as other:
            other.execute("""
                CREATE FUNCTION cancel_claims() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN RAISE EXCEPTION 'refused' USING ERRCODE = '""" + code + """'; END $$;
                CREATE TRIGGER cancel_claims BEFORE UPDATE ON awc.jobs FOR EACH ROW
                WHEN (NEW.state = 'RUNNING') EXECUTE FUNCTION cancel_claims();""")

        def room_again() -> None:  # the refusals stop (the disk has room again)
            with psycopg.connect(db_url, autocommit=True) as other:
                other.execute("DROP TRIGGER cancel_claims ON awc.jobs")

        threading.Timer(1.5, room_again).start()

    def slow(ctx: Any, payload: Any) -> dict[str, bool]:
        time.sleep(0.5)
        return {"slow": True}

    with connect(db_url) as conn:
        slow_id, first = enqueue_many(conn, [{"kind": "slow", "max_attempts": 1, "priority": 2},
                                             {"kind": "cancel_claims", "priority": 1}])
        later = enqueue(conn, "slow")
        engine = Engine(lambda: connect(db_url), registry=registry_with(
            slow=slow, cancel_claims=cancel_claims))
        try:
            report = engine.run(RunSpec(deadline=time.monotonic() + 30, concurrency=2))
        finally:
            engine.close()
        assert report.completed == 3
        rows = conn.execute("SELECT id, state, attempts FROM awc.jobs ORDER BY id").fetchall()
    assert rows == [(slow_id, "COMPLETED", 1), (first, "COMPLETED", 1), (later, "COMPLETED", 1)]


class _Logged:
    """The run's log events, by name (its job events are not looked at)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def jobs(self, events: Any) -> None:
        pass

    def log(self, level: str, event: str, **fields: Any) -> None:
        self.seen.append((event, fields))

    def named(self, event: str) -> list[dict[str, Any]]:
        return [fields for name, fields in self.seen if name == event]


def _hold_row(db_url: str, job_id: int, secs: float) -> None:
    """Another session holds the job's row for `secs`, as an operator's
    transaction would, from before its handler returns."""

    other = psycopg.connect(db_url, autocommit=True)
    other.execute("BEGIN")
    other.execute("SELECT 1 FROM awc.jobs WHERE id = %s FOR UPDATE", (job_id,))

    def let_go() -> None:
        other.execute("COMMIT")
        other.close()

    threading.Timer(secs, let_go).start()


def _locked_engine(db_url: str, reg: Registry, events: _Logged) -> Any:
    from tick.db import connect
    from tick.engine.api import Engine

    def engine_conn() -> psycopg.Connection[Any]:
        found = connect(db_url)
        found.execute("SET lock_timeout = '50ms'")  # as a role or a database may set it
        return found

    return Engine(engine_conn, registry=reg, events=events)


@pytest.mark.timeout(60)
def test_an_outcome_kept_out_for_seconds_is_sent_again_and_the_rest_drains(
    db_url: str,
) -> None:
    """docs/decisions/0036: an outcome a held row keeps out past the quick
    resends was left to its lease, and with one attempt the rescue failed it
    `LeaseExpired` though its handler had succeeded. It is carried and sent
    again alone while the run goes on, and the jobs claimed meanwhile are
    recorded in their own round trips, not held up behind it."""
    from tick.db import connect
    from tick.engine.spec import RunSpec

    def held(ctx: Any, payload: Any) -> dict[str, bool]:
        _hold_row(db_url, ctx.job_id, 2.5)
        return {"held": True}

    def quick(ctx: Any, payload: Any) -> dict[str, bool]:
        time.sleep(0.01)
        return {"quick": True}

    events = _Logged()
    with connect(db_url) as conn:
        held_id = enqueue(conn, "held", max_attempts=1, priority=5)
        quick_ids = enqueue_many(conn, [{"kind": "quick"}] * 200)
        engine = _locked_engine(db_url, registry_with(held=held, quick=quick), events)
        try:
            report = engine.run(RunSpec(deadline=time.monotonic() + 30, concurrency=4))
        finally:
            engine.close()
        assert (report.completed, report.failed, report.discarded) == (201, 0, 0)
        assert conn.execute("SELECT state, attempts FROM awc.jobs WHERE id = %s",
                            (held_id,)).fetchone() == ("COMPLETED", 1)
        states = conn.execute("SELECT state, count(*) FROM awc.jobs WHERE id = ANY(%s) "
                              "GROUP BY state", (quick_ids,)).fetchall()
        # Every quick job was recorded before the held row went: none waited for it.
        late = conn.execute(
            "SELECT count(*) FROM awc.jobs AS q, awc.jobs AS h WHERE q.id = ANY(%s) "
            "AND h.id = %s AND q.finished_at >= h.finished_at", (quick_ids, held_id)).fetchone()
    assert states == [("COMPLETED", 200)]
    assert late == (0,)
    assert [e["job_id"] for e in events.named("outcome_kept_out")] == [held_id]
    assert events.named("outcome_unrecorded") == []


@pytest.mark.timeout(60)
def test_an_outcome_kept_out_until_the_deadline_is_left_to_its_lease_in_time(
    db_url: str,
) -> None:
    """docs/decisions/0036: kept out for longer than the run may last, the
    outcome is tried a last time a second before the deadline and left to
    its lease (`outcome_unrecorded`); the run ends by its deadline."""
    from tick.db import connect
    from tick.engine.spec import RunSpec

    def held(ctx: Any, payload: Any) -> dict[str, bool]:
        _hold_row(db_url, ctx.job_id, 6.0)
        return {"held": True}

    events = _Logged()
    with connect(db_url) as conn:
        held_id = enqueue(conn, "held")
        engine = _locked_engine(db_url, registry_with(held=held), events)
        began = time.monotonic()
        try:
            report = engine.run(RunSpec(deadline=began + 3.5, concurrency=2))
        finally:
            engine.close()
        took = time.monotonic() - began
        row = conn.execute("SELECT state, attempts FROM awc.jobs WHERE id = %s",
                           (held_id,)).fetchone()
    assert row == ("RUNNING", 1)  # its lease brings it back (SPEC §12)
    assert 2.0 < took < 3.6, took
    assert report.completed == 0
    assert [e["job_id"] for e in events.named("outcome_unrecorded")] == [held_id]
