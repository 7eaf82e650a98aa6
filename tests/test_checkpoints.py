"""SPEC §17 over real processes: a job longer than any tick finishes across a
chain of ticks from its checkpoints, without repeating a unit and without
spending attempts; a stale holder cannot overwrite the new holder's state."""

from __future__ import annotations

import json
import signal
from decimal import Decimal
from fractions import Fraction
from typing import Any

import psycopg
import pytest

from tests.support import job_row, run_awc, spawn, wait_for
from tick.producer import enqueue


@pytest.mark.parametrize(("state", "progress", "problem"), [
    ({"n": float("nan")}, None, "the state holds NaN"),
    ({1, 2}, None, "the state is not JSON: Object of type set"),
    ("\udc80", None, "the state contains a lone surrogate"),
    ("a\x00b", None, "the state contains a NUL"),
    ("x" * 1_000_001, None, "at most 1000000 may be saved"),
    (1, 1.5, "progress must be a number in \\[0, 1\\]"),
    (1, float("nan"), "progress must be a number"),
    (1, True, "progress must be a number"),
    (1, "0.5", "progress must be a number"),
])
def test_a_checkpoint_that_cannot_be_saved_raises_in_the_handler(
    state: Any, progress: Any, problem: str
) -> None:
    from tick import JobContext

    sent: list[Any] = []
    ctx = JobContext(1, "k", 1, 5, 1e18, lambda c, saving: sent.append(saving) or 1e18)
    with pytest.raises(ValueError, match=problem):
        ctx.checkpoint(state, progress=progress)
    assert sent == []  # nothing reached the coordinator
    ctx.checkpoint({"ok": [1, None, "é"]}, progress=0.5)
    assert sent == [('{"ok":[1,null,"é"]}', 0.5)]


def unit_rows(conn: psycopg.Connection[Any], job_id: int) -> list[tuple[int, str, int, int]]:
    """(unit, claim, saved at the claim's start, pid), in the order done."""
    return conn.execute("SELECT unit, claim::text, saved, pid FROM test_units WHERE job_id = %s "
                        "ORDER BY unit, claim", (job_id,)).fetchall()


def assert_each_unit_once(conn: psycopg.Connection[Any], job_id: int, units: int) -> None:
    assert [r[0] for r in unit_rows(conn, job_id)] == list(range(units))


def test_ten_units_at_three_a_claim_complete_in_four_claims(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "units", {"units": 10, "per_claim": 3}, max_attempts=1)
    reports = []
    for _ in range(4):
        assert job_row(conn, job_id)["state"] == "PENDING"
        done = run_awc(awc_env, "tick", "--max-jobs", "1", "--json")
        assert done.returncode == 0, done.stderr
        reports.append(json.loads(done.stdout))
    job = job_row(conn, job_id)
    assert (job["state"], job["attempts"], job["continues"]) == ("COMPLETED", 1, 3)
    assert [r["continued"] for r in reports] == [1, 1, 1, 0]
    assert_each_unit_once(conn, job_id, 10)
    claims = {}
    for unit, claim, saved, _ in unit_rows(conn, job_id):
        claims.setdefault(claim, (saved, []))[1].append(unit)
    assert sorted(claims.values()) == [(0, [0, 1, 2]), (3, [3, 4, 5]), (6, [6, 7, 8]),
                                       (9, [9])]
    assert job["progress"] == 1.0
    assert json.loads(run_awc(awc_env, "jobs", "show", str(job_id)).stdout)["continues"] == 3
    listed = run_awc(awc_env, "jobs", "list").stdout
    assert "progress" in listed.splitlines()[0] and "100%" in listed


def test_a_job_cut_at_its_deadline_continues_from_its_checkpoint(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "units", {"units": 12, "unit_secs": 0.4}, max_attempts=1)
    reports = []
    for _ in range(10):
        done = run_awc(awc_env, "tick", "--max-secs", "2", "--json")
        assert done.returncode == 0, done.stderr
        reports.append(json.loads(done.stdout))
        if job_row(conn, job_id)["state"] != "PENDING":
            break
    job = job_row(conn, job_id)
    # max_attempts=1: a cut spending an attempt would have dead-lettered it.
    assert (job["state"], job["attempts"]) == ("COMPLETED", 1)
    assert job["continues"] >= 2 and job["last_error"] is None
    assert sum(r["continued"] for r in reports) == job["continues"]
    assert all(r["stop_reason"] == "deadline" for r in reports if r["continued"])
    assert_each_unit_once(conn, job_id, 12)
    # Each claim started where the one before it last saved.
    done_by: dict[str, list[int]] = {}
    starts: dict[str, int] = {}
    for unit, claim, saved, _ in unit_rows(conn, job_id):
        done_by.setdefault(claim, []).append(unit)
        starts[claim] = saved
    for claim, units in done_by.items():
        assert units[0] == starts[claim] and units == list(range(units[0], units[-1] + 1))


def test_a_job_that_never_checkpoints_runs_out_of_attempts(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "units", {"units": 12, "unit_secs": 0.4, "checkpoint": False},
                     max_attempts=2)
    for _ in range(2):
        assert run_awc(awc_env, "tick", "--max-secs", "2").returncode == 0
        conn.execute("UPDATE awc.jobs SET run_at = now() WHERE id = %s", (job_id,))  # no backoff
    job = job_row(conn, job_id)
    assert (job["state"], job["attempts"], job["continues"]) == ("FAILED", 2, 0)
    assert "deadline exceeded" in job["last_error"] and job["checkpoint"] is None


def test_a_stale_holder_cannot_overwrite_the_new_holders_checkpoint(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "units", {"units": 25, "unit_secs": 0.2})
    stale = spawn(awc_env, "tick", "--max-secs", "3")
    try:
        wait_for(lambda: job_row(conn, job_id)["checkpoint"], timeout=30, what="a checkpoint")
        stale.send_signal(signal.SIGSTOP)  # frozen holding its claim
        wait_for(lambda: conn.execute("SELECT locked_until < now() FROM awc.jobs WHERE id = %s",
                                      (job_id,)).fetchone() == (True,),
                 timeout=30, what="the frozen claim's lease to end")
        fresh = spawn(awc_env, "tick", "--max-secs", "30")
        assert fresh.wait(timeout=60) == 0, fresh.communicate()[1]
        stale.send_signal(signal.SIGCONT)
        stale.communicate(timeout=30)
    finally:
        stale.kill()
    job = job_row(conn, job_id)
    assert job["state"] == "COMPLETED"
    assert job["checkpoint"] == {"next": 25, "pid": fresh.pid}
    assert_each_unit_once(conn, job_id, 25)
    by_stale = [r[0] for r in unit_rows(conn, job_id) if r[3] == stale.pid]
    assert by_stale and max(by_stale) < min(r[0] for r in unit_rows(conn, job_id)
                                            if r[3] == fresh.pid)


def test_sigterm_past_the_grace_of_a_checkpointed_job_is_a_continue(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "units", {"units": 100, "unit_secs": 0.3})
    proc = spawn({**awc_env, "AWC_STOP_GRACE_SECS": "1"}, "tick", "--max-secs", "30", "--json")
    try:
        wait_for(lambda: job_row(conn, job_id)["checkpoint"], timeout=30, what="a checkpoint")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    report = json.loads(out)
    assert (report["continued"], report["stop_reason"]) == (1, "stopped"), err
    job = job_row(conn, job_id)
    assert (job["state"], job["attempts"], job["continues"]) == ("PENDING", 0, 1)
    saved = job["checkpoint"]["next"]
    assert saved >= 1 and [r[0] for r in unit_rows(conn, job_id)] == list(range(saved))


@pytest.mark.parametrize("progress", [
    1e-50, 5e-324, 1e-45, 3e-39, 0.0, 1.0, 0, 1, 0.1, 1 - 1e-12,
    Fraction(1, 3), Decimal("0.25"),
])
def test_every_float_in_0_1_is_a_progress_the_job_keeps(
    conn: psycopg.Connection[Any], progress: Any
) -> None:
    """SPEC §17: a progress is any float in [0, 1]. The column is a `real`,
    which cannot hold 1e-50 (PostgreSQL refused it as an underflow, and the
    handler heard that its *state* was refused): it is saved as the nearest
    value the column holds, and the job completes."""
    from tick import tick
    from tick.engine.registry import Registry, handler

    heard: list[BaseException] = []

    def saving(ctx: Any, payload: Any) -> Any:
        try:
            ctx.checkpoint({"at": 1}, progress=progress)
        except Exception as error:
            heard.append(error)
            raise
        return {"ok": True}

    reg = Registry()
    handler("saving", registry=reg)(saving)
    job_id = enqueue(conn, "saving", {}, max_attempts=1)
    report = tick(conn, registry=reg, max_secs=30)
    assert heard == [] and report.completed == 1
    job = job_row(conn, job_id)
    assert job["state"] == "COMPLETED" and job["checkpoint"] == {"at": 1}
    assert job["progress"] == pytest.approx(float(progress), rel=1e-6, abs=1e-37)
    assert 0.0 <= job["progress"] <= 1.0


@pytest.mark.parametrize("progress", [-1e-50, 1 + 1e-9, float("inf"), 10**400, Decimal("NaN"),
                                      Fraction(3, 2), complex(0.5, 0), b"0.5"])
def test_a_progress_outside_0_1_names_progress_not_the_state(progress: Any) -> None:
    """SPEC §17: the error names the argument that is wrong."""
    from tick import JobContext

    ctx = JobContext(1, "k", 1, 5, 1e18, lambda c, saving: 1e18)
    with pytest.raises(ValueError, match="progress must be a number in \\[0, 1\\]") as caught:
        ctx.checkpoint({"fine": True}, progress=progress)
    assert "state" not in str(caught.value)


def test_a_checkpoint_the_database_refuses_says_why_and_the_job_runs_on(
    conn: psycopg.Connection[Any],
) -> None:
    """SPEC §17: a refusal awc could not foresee (here a constraint an
    operator added) reaches the handler with the server's reason, not a
    guess that blames the state; the handler may carry on."""
    from tick import tick
    from tick.engine.registry import Registry, handler

    conn.execute("ALTER TABLE awc.jobs ADD CONSTRAINT no_strings "
                 "CHECK (jsonb_typeof(checkpoint) IS DISTINCT FROM 'string')")
    heard: list[str] = []

    def saving(ctx: Any, payload: Any) -> Any:
        try:
            ctx.checkpoint("secret-ish text", progress=0.5)
        except ValueError as error:
            heard.append(str(error))
        ctx.checkpoint({"at": 2}, progress=1.0)
        return {"ok": True}

    reg = Registry()
    handler("saving", registry=reg)(saving)
    job_id = enqueue(conn, "saving", {}, max_attempts=1)
    assert tick(conn, registry=reg, max_secs=30).completed == 1
    assert len(heard) == 1 and "CheckViolation" in heard[0] and "no_strings" in heard[0]
    assert "secret-ish" not in heard[0]
    assert job_row(conn, job_id)["checkpoint"] == {"at": 2}
