"""SPEC §23 with §6's one-shot tick (docs/decisions/0034): a fair claim that
comes back short while keyed jobs are still ready does not end the tick
"drained". It comes back short when another claimer took or holds a job it
chose (it locks the jobs it chose, SKIP LOCKED), or when a per-key limit
kept one key out and the slots left to the others were capped at what
round-robin would give them. Each test runs one real `awc tick` process."""

from __future__ import annotations

import json
import signal
from typing import Any

import psycopg
import pytest

from tests.support import run_awc, spawn, wait_for
from tick.producer import enqueue_many


def enqueue_keys(conn: psycopg.Connection[Any], keys: list[str], each: int) -> None:
    enqueue_many(conn, [{"kind": "noop", "key": key} for _ in range(each) for key in keys])


def states(conn: psycopg.Connection[Any]) -> dict[tuple[str, str], int]:
    return {(k, s): n for k, s, n in conn.execute(
        "SELECT key, state, count(*) FROM awc.jobs GROUP BY key, state").fetchall()}


def test_a_tick_claims_past_jobs_another_transaction_holds(
    db_url: str, conn: psycopg.Connection[Any], awc_env: dict[str, str],
) -> None:
    """Each key's first job is locked by another transaction (as a
    concurrent claimer's claim in flight holds the jobs it took): every
    claim of the tick chooses them and skips them. The tick takes all the
    others, waits for those, then takes them once the lock is gone."""
    enqueue_keys(conn, ["a", "b", "c"], 20)
    with psycopg.connect(db_url) as holder:
        heads = [row[0] for row in holder.execute(
            "SELECT id FROM awc.jobs WHERE id IN (SELECT min(id) FROM awc.jobs GROUP BY key) "
            "FOR UPDATE").fetchall()]
        assert len(heads) == 3
        tick = spawn({**awc_env, "AWC_WORKER_CONCURRENCY": "8"}, "tick", "--json")
        try:
            wait_for(lambda: conn.execute(
                "SELECT count(*) FROM awc.jobs WHERE state = 'COMPLETED'").fetchone() == (57,),
                timeout=60, what="the jobs not held to complete")
            assert tick.poll() is None, tick.communicate()  # it waits for the held ones
        finally:
            holder.rollback()
        out, err = tick.communicate(timeout=60)
    assert tick.returncode == 0, err
    report = json.loads(out)
    assert (report["claimed"], report["stop_reason"]) == (60, "drained"), report
    assert states(conn) == {("a", "COMPLETED"): 20, ("b", "COMPLETED"): 20,
                            ("c", "COMPLETED"): 20}


def test_a_paused_key_does_not_end_the_tick_before_the_other_keys(
    conn: psycopg.Connection[Any], awc_env: dict[str, str],
) -> None:
    """`key:paused` at max_running 0 holds its jobs (and nothing is "held
    back": a paused key is no reason to wait). With 8 slots and two keys,
    round-robin gives each key 7 candidates; the paused key's are left out,
    so each claim takes 7 of 8: short, yet the other key has more."""
    assert run_awc(awc_env, "limits", "set", "key:paused", "--max-running", "0").returncode == 0
    enqueue_keys(conn, ["paused", "open"], 30)
    done = run_awc({**awc_env, "AWC_WORKER_CONCURRENCY": "8"}, "tick", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["claimed"], report["stop_reason"]) == (30, "drained"), report
    assert states(conn) == {("open", "COMPLETED"): 30, ("paused", "PENDING"): 30}


def test_one_slot_reaches_the_key_after_a_paused_one(
    conn: psycopg.Connection[Any], awc_env: dict[str, str],
) -> None:
    """With one slot, each claim walks one key: a paused key first in the
    rotation must not end the tick (nor keep it on that key)."""
    assert run_awc(awc_env, "limits", "set", "key:a-paused", "--max-running", "0").returncode == 0
    enqueue_keys(conn, ["a-paused", "b-open"], 3)
    done = run_awc({**awc_env, "AWC_WORKER_CONCURRENCY": "1"}, "tick", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["claimed"], report["stop_reason"]) == (3, "drained"), report
    assert states(conn) == {("b-open", "COMPLETED"): 3, ("a-paused", "PENDING"): 3}


def test_one_tick_at_most_concurrency_drains_every_key(
    conn: psycopg.Connection[Any], awc_env: dict[str, str],
) -> None:
    """Four keys and unkeyed jobs, more than the slots: one tick with the
    most slots (256) takes them all through the fair claim, skipping the
    walk after the first (decision 0034), and ends drained."""
    enqueue_keys(conn, ["k1", "k2", "k3", "k4"], 100)
    enqueue_many(conn, [{"kind": "noop"} for _ in range(50)])
    done = run_awc({**awc_env, "AWC_WORKER_CONCURRENCY": "256"}, "tick", "--max-jobs", "1000",
                   "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["claimed"], report["stop_reason"]) == (450, "drained"), report
    assert conn.execute("SELECT count(*) FROM awc.jobs WHERE state <> 'COMPLETED'"
                        ).fetchone() == (0,)


def test_the_rotation_across_keys_goes_on_from_one_tick_to_the_next(
    conn: psycopg.Connection[Any], awc_env: dict[str, str],
) -> None:
    """Each `awc tick` (cron, a Lambda invocation) is a new process: it
    starts the rotation where the last run's history row left it, so with
    more keys than one tick claims every key is served in turn. Each began
    at the first key, and three ticks of 100 over 300 keys served the first
    100 three times and the other 200 never."""
    keys = [f"tenant-{n:03d}" for n in range(300)]
    enqueue_keys(conn, keys, 3)
    env = {**awc_env, "AWC_WORKER_CONCURRENCY": "50"}
    for _ in range(3):
        done = run_awc(env, "tick", "--max-jobs", "100", "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["claimed"] == 100
    served = dict(conn.execute(
        "SELECT key, count(*) FROM awc.jobs WHERE state = 'COMPLETED' GROUP BY key").fetchall())
    assert sorted(served) == keys and set(served.values()) == {1}, served


def ticks(env: dict[str, str], n: int, *args: str) -> None:
    for _ in range(n):
        done = run_awc(env, "tick", "--max-jobs", "4", "--json", *args)
        assert done.returncode == 0, done.stderr[-2000:]


def served(conn: psycopg.Connection[Any], priority: int = 0) -> dict[str, int]:
    return dict(conn.execute(
        "SELECT coalesce(key, '<none>'), count(*) FROM awc.jobs "
        "WHERE state = 'COMPLETED' AND priority = %s GROUP BY 1", (priority,)).fetchall())


def test_the_rotation_goes_on_past_the_jobs_without_a_key(
    conn: psycopg.Connection[Any], awc_env: dict[str, str],
) -> None:
    """A run whose last key served was the jobs without a key (the key '')
    left no cursor: the next tick began from an older run's, every time, and
    keys a and b were never served again after the second tick."""
    keys = list("abcde")
    enqueue_keys(conn, keys, 10)
    enqueue_many(conn, [{"kind": "noop"} for _ in range(10)])
    ticks({**awc_env, "AWC_WORKER_CONCURRENCY": "4"}, 8)
    got = served(conn)
    assert sorted(got) == ["<none>", *keys] and min(got.values()) >= 4, got


def test_a_filtered_tick_goes_on_with_the_rotation(
    conn: psycopg.Connection[Any], awc_env: dict[str, str],
) -> None:
    """`awc tick --kind` left no key cursor: every such tick began at the
    first key, and key e was never served."""
    keys = list("abcde")
    enqueue_keys(conn, keys, 10)
    ticks({**awc_env, "AWC_WORKER_CONCURRENCY": "4"}, 5, "--kind", "noop")
    got = served(conn)
    assert sorted(got) == keys and min(got.values()) >= 3, got


def test_a_higher_prioritys_key_does_not_hold_the_rotation_below_it(
    conn: psycopg.Connection[Any], awc_env: dict[str, str],
) -> None:
    """The cursor was the last key served at the first priority served: one
    priority-1 job of key m before each tick set it to m, and each tick's
    priority-0 claims started after m (n, o, p every time: 14 keys never)."""
    keys = [chr(ord("a") + n) for n in range(20)]
    enqueue_keys(conn, keys, 5)
    env = {**awc_env, "AWC_WORKER_CONCURRENCY": "4"}
    for _ in range(5):
        enqueue_many(conn, [{"kind": "noop", "key": "m", "priority": 1}])
        ticks(env, 1)
    assert served(conn, 1) == {"m": 5}
    assert len(served(conn)) == 15, served(conn)  # three new keys a tick


@pytest.mark.timeout(240)
@pytest.mark.parametrize("limited", [False, True], ids=["free", "a-limit-binds"])
def test_ticks_and_a_killed_one_drain_many_keys_each_job_once(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], limited: bool,
) -> None:
    """SPEC §23 with §12: 600 tenants of three jobs each, more keys than
    any claim's slots, so the fair claim's short form claims (decision
    0034), drained by three `awc tick` processes at once while a fourth is
    SIGKILLed mid-drain; and the same while a kind limit binds (a paused
    kind with a job ready), where every claim is the lane claim, which takes
    each lane round-robin across keys too (decision 0034, amended).
    Afterwards, from the database: every job COMPLETED;
    a job ran twice only if the killed tick ran it (its lease expired and
    another took it); every run of a job is one of its attempts."""
    enqueue_many(conn, [{"kind": "sleep", "payload": {"seconds": 0.002}, "key": f"t{n:03d}"}
                        for _ in range(3) for n in range(600)])
    if limited:
        enqueue_many(conn, [{"kind": "held"}])
        conn.execute("INSERT INTO awc.limits (scope, name, max_running) VALUES ('kind', 'held', 0)")
    env = {**awc_env, "AWC_WORKER_LEASE_SECS": "2", "AWC_WORKER_CONCURRENCY": "16",
           "AWC_TICK_MAX_JOBS": "2000"}
    victim = spawn({**env, "AWC_WORKER_ID": "victim"}, "tick")
    others = [spawn({**env, "AWC_WORKER_ID": f"other{n}"}, "tick") for n in range(3)]
    wait_for(lambda: conn.execute("SELECT count(*) >= 20 FROM test_ledger WHERE pid = %s",
                                  (victim.pid,)).fetchone() == (True,),
             what="the victim to be running jobs")
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    for proc in others:
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]

    def finished() -> bool:  # what the victim held comes back as its leases expire
        run_awc(env, "tick")
        return conn.execute("SELECT count(*) FROM awc.jobs WHERE state <> 'COMPLETED' "
                            "AND kind <> 'held'").fetchone() == (0,)

    wait_for(finished, timeout=90, interval=0.5, what="every job to complete")
    assert conn.execute("SELECT count(*) FROM awc.jobs WHERE kind <> 'held'").fetchone() == (1800,)
    twice = conn.execute(
        "SELECT job_id, array_agg(pid) FROM test_ledger GROUP BY job_id HAVING count(*) > 1"
    ).fetchall()
    assert all(victim.pid in pids for _, pids in twice), twice
    assert conn.execute(
        "SELECT count(*) FROM awc.jobs AS j WHERE j.kind <> 'held' AND (SELECT count(*) "
        "FROM test_ledger AS l WHERE l.job_id = j.id) NOT BETWEEN 1 AND j.attempts"
    ).fetchone() == (0,)


def test_a_key_cursor_jsonb_refuses_in_the_last_history_row_stops_no_tick(
    conn: psycopg.Connection[Any], awc_env: dict[str, str],
) -> None:
    """A history row's key cursor edited to hold a NUL or a lone surrogate
    (JSON escapes Python reads and jsonb refuses): each later `awc tick`
    seeded its rotation from it and failed its first claim, exit 1, the
    jobs left PENDING. Such a cursor is no cursor: the rotation starts
    afresh and the tick drains."""
    enqueue_keys(conn, ["a", "b"], 2)
    done = run_awc(awc_env, "tick", "--max-jobs", "1")
    assert done.returncode == 0, done.stderr
    for cursor in ('{"~": ["0"], "0": "a\\u0000"}', '{"~": ["0"], "0": "\\ud800"}'):
        conn.execute("UPDATE awc.ticks SET key_after = %s WHERE id = (SELECT max(id) FROM "
                     "awc.ticks)", (cursor,))
        done = run_awc(awc_env, "tick", "--max-jobs", "1", "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["completed"] == 1
