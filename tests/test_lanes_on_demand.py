"""SPEC §18 (docs/decisions/0018, amended): step 2 of a claim, the lanes
(claim_limited_jobs.sql), is sent only while a kind or queue limit exists;
step 1 (claim_limits.sql), sent with every claim, says whether one does.
Without one the lanes claim nothing, and their plan's set-up cost a no-op
drain a fifth of its rate. A limit set between two claims is never
overrun: the claim that did not send the lanes sees it in step 1, and its
walk, its gate and the fair claim all yield to the lanes and claim nothing;
the engine claims again at once, with them."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest

from tests.support import run_awc, spawn, stop, wait_for
from tick.engine.claims import Claims
from tick.engine.spec import RunSpec
from tick.producer import enqueue_many
from tick.queue import Writes, round_trip

pytestmark = pytest.mark.timeout(120)


def claim(conn: psycopg.Connection[Any], claims: Claims) -> list[int]:
    """One claim as the coordinator makes it (request, round trip, took)."""
    request = claims.request(time.monotonic())
    assert request is not None
    done = round_trip(conn, Writes(), request)
    claims.took(request, done.claimed, done.held_back, done.mark, done.fair,
                done.claim_refused, done.lanes)
    return [row.id for row in done.claimed]


@pytest.mark.parametrize("key", [None, "tenant"])
def test_a_limit_set_between_two_claims_is_not_overrun(
    conn: psycopg.Connection[Any], key: str | None,
) -> None:
    """Without limits the next claim leaves the lanes out; a kind limit of
    one running job set before it: that claim takes nothing (plain walk or
    fair claim alike), says so, and the next, with the lanes, takes one."""
    enqueue_many(conn, [{"kind": "noop", "key": key} for _ in range(20)])
    claims = Claims(RunSpec(concurrency=4), [f"s{n}" for n in range(4)], "{}")
    taken: list[int] = []
    while len(taken) < 4:  # keyed: the gate hands the first claim to the fair claim
        taken += claim(conn, claims)
    assert len(taken) == 4 and claims.lanes is False
    claims.free.extend(f"t{n}" for n in range(4))  # four slots free again
    conn.execute("INSERT INTO awc.limits (scope, name, max_running) VALUES ('kind', 'noop', 5)")
    request = claims.request(time.monotonic())
    assert request is not None and request.lanes is False
    assert claim(conn, claims) == []
    assert claims.lanes is True and claims.ended is None
    assert claims.idle_until <= time.monotonic()  # again at once, not after a wait
    assert len(claim(conn, claims)) == 1  # five running at most: four were
    assert conn.execute("SELECT count(*) FROM awc.jobs WHERE state = 'RUNNING'"
                        ).fetchone() == (5,)


def test_without_limits_the_lanes_are_not_sent_and_with_one_they_are(
    conn: psycopg.Connection[Any],
) -> None:
    enqueue_many(conn, [{"kind": "noop"} for _ in range(10)])
    claims = Claims(RunSpec(concurrency=2), ["a", "b"], "{}")
    first = claims.request(time.monotonic())
    # Nothing known yet: a first claim goes without them (their set-up was
    # most of an empty tick's exchanges); it takes the jobs all the same.
    assert first is not None and first.lanes is False
    assert len(claim(conn, claims)) == 2
    claims.release("a")
    claims.release("b")
    later = claims.request(time.monotonic())
    assert later is not None and later.lanes is False
    conn.execute("INSERT INTO awc.limits (scope, name, max_running) VALUES ('queue', 'other', 3)")
    claim(conn, claims)  # a queue limit elsewhere: nothing of this queue is held
    assert claims.lanes is True


@pytest.mark.parametrize("key", [None, "tenant"])
def test_while_the_lanes_are_the_claim_they_go_alone_and_hand_back_at_once(
    conn: psycopg.Connection[Any], key: str | None,
) -> None:
    """While a limit binds the lanes are the claim (the gate, the fair claim
    and the walk after them claim nothing): the next claim sends steps 1
    and 2 alone. When no limit binds any more, that claim takes nothing,
    says so, and the next, in full, claims at once."""
    enqueue_many(conn, [{"kind": "noop", "key": key} for _ in range(20)])
    enqueue_many(conn, [{"kind": "held"}])
    conn.execute("INSERT INTO awc.limits (scope, name, max_running) VALUES ('kind', 'held', 0)")
    claims = Claims(RunSpec(concurrency=4), [f"s{n}" for n in range(4)], "{}")
    assert claim(conn, claims) == []  # a first claim, without the lanes, yields to them
    assert claims.lanes is True and claims.idle_until <= time.monotonic()
    assert len(claim(conn, claims)) == 4
    claims.free.extend(f"t{n}" for n in range(4))
    request = claims.request(time.monotonic())
    assert request is not None and request.lanes_only is True
    assert len(claim(conn, claims)) == 4  # the lanes alone claimed
    claims.free.extend(f"u{n}" for n in range(4))
    conn.execute("DELETE FROM awc.limits")  # nothing binds: the walk is the claim again
    assert claim(conn, claims) == [] and claims.ended is None
    assert claims.idle_until <= time.monotonic()  # again at once, not after a wait
    request = claims.request(time.monotonic())
    assert request is not None and request.lanes_only is False
    taken = claim(conn, claims)
    while not taken and key:  # keyed: the gate hands the claim to the fair claim
        taken = claim(conn, claims)
    assert len(taken) == 4
    assert conn.execute("SELECT count(*) FROM awc.jobs WHERE state = 'RUNNING'"
                        ).fetchone() == (12,)


def test_a_limit_set_while_a_loop_drains_holds_from_then_on(
    conn: psycopg.Connection[Any], awc_env: dict[str, str],
) -> None:
    """An `awc loop` drains slow jobs without limits (no lanes sent), then
    `awc limits set kind:sleep --max-running 2`: sampled from the database
    until the queue is empty, never more than 2 running once the limit's
    first claim has passed (the jobs already running finish). Forty more
    jobs go in once the limit is set: on a busy machine the loop had
    drained the first 120 before `awc limits set` returned, and there was
    nothing left to sample."""
    sleepy = [{"kind": "sleep", "payload": {"seconds": 0.05}}]
    enqueue_many(conn, sleepy * 120)
    loop = spawn({**awc_env, "AWC_WORKER_CONCURRENCY": "8"}, "loop")
    try:
        wait_for(lambda: conn.execute("SELECT count(*) >= 30 FROM awc.jobs "
                                      "WHERE state = 'COMPLETED'").fetchone() == (True,),
                 what="the drain to be under way")
        done = run_awc(awc_env, "limits", "set", "kind:sleep", "--max-running", "2")
        assert done.returncode == 0, done.stderr
        enqueue_many(conn, sleepy * 40)
        # The jobs claimed before the limit finish within their 0.05 s.
        wait_for(lambda: conn.execute("SELECT count(*) <= 2 FROM awc.jobs "
                                      "WHERE state = 'RUNNING'").fetchone() == (True,),
                 what="the running jobs to fall to the limit")
        most = 0
        while conn.execute("SELECT count(*) FROM awc.jobs WHERE state = 'PENDING'"
                           ).fetchone() != (0,):
            running = conn.execute("SELECT count(*) FROM awc.jobs WHERE state = 'RUNNING'"
                                   ).fetchone()
            assert running is not None
            most = max(most, int(running[0]))
        assert 1 <= most <= 2, most
    finally:
        stop(loop)
