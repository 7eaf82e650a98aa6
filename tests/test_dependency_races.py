"""SPEC §20, §12: the fan-in race. 200 parents and one child, the parents
finished by concurrent `awc tick` processes, by two loops, and with a tick
SIGKILLed mid-drain: the child runs exactly once, after every parent,
asserted from the database afterwards (the ledger and the job rows)."""

from __future__ import annotations

import json
import signal
from typing import Any

import psycopg
import pytest

from tests.support import job_row, run_awc, spawn, stop, wait_for
from tick.producer import enqueue_many

pytestmark = pytest.mark.timeout(240)

PARENTS = 200


def fan_in(conn: psycopg.Connection[Any], kind: str = "ledger",
           payload: dict[str, Any] | None = None) -> tuple[list[int], int]:
    """PARENTS parents and one child after all of them, in one call."""
    jobs: list[dict[str, Any]] = [{"kind": kind, "payload": payload or {}}
                                  for _ in range(PARENTS)]
    jobs.append({"kind": "ledger", "after": [f"#{n}" for n in range(PARENTS)]})
    ids = enqueue_many(conn, jobs)
    return ids[:-1], ids[-1]


def assert_ran_once_after_every_parent(conn: psycopg.Connection[Any], parents: list[int],
                                       child: int) -> None:
    runs = conn.execute("SELECT count(*) FROM test_ledger WHERE job_id = %s",
                        (child,)).fetchone()
    assert runs == (1,)  # its side effect happened exactly once
    job = job_row(conn, child)
    assert (job["state"], job["attempts"], job["waiting"]) == ("COMPLETED", 1, 0)
    row = conn.execute("SELECT count(*) FILTER (WHERE state = 'COMPLETED') FROM awc.jobs "
                       "WHERE id = ANY(%s)", (parents,)).fetchone()
    assert row == (PARENTS,)
    # Every parent was final before the child ran. Not from the child's
    # started_at: that is its claiming transaction's start, and the
    # transaction that takes the count to zero may have begun before another
    # parent's completion that committed first (it waited for that one's lock
    # on the child). The run's own clock, in the ledger, is after them all.
    first = conn.execute("SELECT min(at) FROM test_ledger WHERE job_id = %s",
                         (child,)).fetchone()
    last = conn.execute("SELECT max(finished_at) FROM awc.jobs WHERE id = ANY(%s)",
                        (parents,)).fetchone()
    assert first is not None and last is not None and first[0] >= last[0]


def test_four_tick_processes_finish_a_fan_in_and_its_child_runs_once(
        conn: psycopg.Connection[Any], awc_env: dict[str, str]) -> None:
    parents, child = fan_in(conn)
    env = {**awc_env, "AWC_TICK_MAX_JOBS": "1000", "AWC_WORKER_CONCURRENCY": "4"}
    procs = [spawn({**env, "AWC_WORKER_ID": f"fan{n}"}, "tick", "--json") for n in range(4)]
    completed = 0
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err[-2000:]
        completed += json.loads(out)["completed"]
    assert completed == PARENTS + 1  # the child in the same tick as its last parent
    assert_ran_once_after_every_parent(conn, parents, child)


def test_two_loops_finish_a_fan_in_and_its_child_runs_once(
        conn: psycopg.Connection[Any], awc_env: dict[str, str]) -> None:
    parents, child = fan_in(conn)
    env = {**awc_env, "AWC_WORKER_CONCURRENCY": "4"}
    loops = [spawn({**env, "AWC_WORKER_ID": f"loop{n}"}, "loop") for n in range(2)]
    try:
        wait_for(lambda: job_row(conn, child)["state"] == "COMPLETED", timeout=120,
                 what="the child to complete")
    finally:
        for proc in loops:
            stop(proc)
    assert_ran_once_after_every_parent(conn, parents, child)


def test_a_tick_killed_mid_drain_leaves_the_child_to_run_once(
        conn: psycopg.Connection[Any], awc_env: dict[str, str]) -> None:
    parents, child = fan_in(conn, "sleep", {"seconds": 0.05})
    env = {**awc_env, "AWC_WORKER_LEASE_SECS": "2", "AWC_WORKER_CONCURRENCY": "4",
           "AWC_TICK_MAX_JOBS": "1000"}
    victim = spawn({**env, "AWC_WORKER_ID": "victim"}, "tick")
    others = [spawn({**env, "AWC_WORKER_ID": f"other{n}"}, "tick") for n in range(2)]
    wait_for(lambda: conn.execute("SELECT count(DISTINCT job_id) >= 40 FROM test_ledger")
             .fetchone() == (True,), what="the drain to be under way")
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    held = conn.execute("SELECT count(*) FROM test_ledger WHERE pid = %s",
                        (victim.pid,)).fetchone()
    assert held is not None and held[0] > 0  # the killed tick had run parents
    for proc in others:
        proc.communicate(timeout=120)

    # What the victim held comes back when its leases expire; ticks finish it.
    def finished() -> bool:
        run_awc(env, "tick")
        return bool(job_row(conn, child)["state"] == "COMPLETED")

    wait_for(finished, timeout=60, interval=0.5, what="the child to complete")
    assert_ran_once_after_every_parent(conn, parents, child)
