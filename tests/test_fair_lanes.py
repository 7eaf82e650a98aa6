"""Fair share while a kind or queue limit may bind (SPEC §23 with §18,
docs/decisions/0034, amended 2026-12-06, late): the lane claim
(claim_limited_jobs.sql), which is the claim whenever a limit may bind,
takes each lane's jobs round-robin across keys from the claimer's key
cursor, as the fair claim takes them across a priority. Before, it took
them first in, first out within each lane: with one paused kind, a tick of
60 took 60 jobs of a 2,000-job tenant and none of ten small tenants."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

import psycopg

from tests.claiming import claim_fairly as claim
from tests.claiming import enqueue_keyed as enqueue
from tests.claiming import explained, fair_params, keys_of, read
from tick.engine.cursor import Cursor
from tick.statements import sql


def pause_another_kind(conn: psycopg.Connection[Any]) -> None:
    """A limit that binds (a paused kind with a ready job) on a kind none of
    the test's jobs has: the lane claim claims, and limits nothing else."""
    conn.execute("INSERT INTO awc.jobs (kind) VALUES ('zz-paused')")
    conn.execute("INSERT INTO awc.limits (scope, name, max_running) "
                 "VALUES ('kind', 'zz-paused', 0)")


def test_a_small_key_runs_in_the_first_claim_while_a_limit_binds(
    conn: psycopg.Connection[Any],
) -> None:
    """The issue's case: `awc pause kind:slow`, key A's 2,000 jobs enqueued
    first, ten keys of ten after it; one claim of 60 takes jobs of all
    eleven keys, no key a second job while another had none."""
    pause_another_kind(conn)
    enqueue(conn, 2000, "A")
    small = [enqueue(conn, 10, f"k{n}") for n in range(10)]
    got = claim(conn, Cursor(), 60)
    assert len(got) == 60
    counts = Counter(keys_of(conn, got))
    assert set(counts) == {"A", *(f"k{n}" for n in range(10))}
    assert max(counts.values()) - min(counts.values()) <= 1, counts
    assert all(ids[0] in got for ids in small)


def test_the_limited_kinds_own_keys_share_its_room(conn: psycopg.Connection[Any]) -> None:
    """A kind limit of six over three keys (one with 1,000 jobs): two each,
    and the claim says the kind held the rest back."""
    conn.execute("INSERT INTO awc.limits (scope, name, max_running) VALUES ('kind', 'noop', 6)")
    enqueue(conn, 1000, "big")
    enqueue(conn, 5, "b")
    enqueue(conn, 5, "c")
    got = claim(conn, Cursor(), 20)
    assert Counter(keys_of(conn, got)) == {"big": 2, "b": 2, "c": 2}


def test_a_per_key_limit_under_a_binding_kind_limit_serves_every_key(
    conn: psycopg.Connection[Any],
) -> None:
    """`key:* --max-running 1` on top of a kind limit of ten: the lane's
    candidates are each key's first jobs in turn, so acme's 100 (enqueued
    first) take one place and globex gets the other. Before, the lane's
    first ten were all acme's: one ran, nine were held back, globex waited."""
    conn.execute("INSERT INTO awc.limits (scope, name, max_running) "
                 "VALUES ('kind', 'noop', 10), ('key', '*', 1)")
    enqueue(conn, 100, "acme")
    enqueue(conn, 5, "globex")
    got = claim(conn, Cursor(), 20)
    assert sorted(keys_of(conn, got)) == ["acme", "globex"]


def test_keys_take_turns_across_claims_under_a_limit(conn: psycopg.Connection[Any]) -> None:
    """More keys than the limit's room: each claim serves the keys after the
    last one served, so every key is served once before any twice."""
    conn.execute("INSERT INTO awc.limits (scope, name, max_running) VALUES ('kind', 'noop', 4)")
    keys = [f"t{n:02d}" for n in range(12)]
    for key in keys:
        enqueue(conn, 3, key)
    cursor, served = Cursor(), []
    for _ in range(3):
        got = claim(conn, cursor, 10)
        assert len(got) == 4
        served += keys_of(conn, got)
        conn.execute("UPDATE awc.jobs SET state = 'COMPLETED', locked_until = NULL, "
                     "finished_at = now() WHERE id = ANY (%s)", (got,))
    assert sorted(served) == keys, served


def lanes_claim(conn: psycopg.Connection[Any], slots: int,
                key_after: str) -> tuple[list[int], Any, bool]:
    """The ids the lane claim takes (steps 1 and 2 of a round trip), its next
    key cursors and held_back, rolled back."""
    params = fair_params(slots, key_after)
    with conn.transaction(force_rollback=True):
        conn.execute(sql("pin_plans"))
        conn.execute(sql("claim_limits"), params)
        rows = conn.execute(sql("claim_limited_jobs"), params).fetchall()
    return (sorted(row[0] for row in rows if row[0] is not None),
            rows[-1][-3] and json.loads(rows[-1][-3]), bool(rows[-1][-1]))


def fair_claim(conn: psycopg.Connection[Any], slots: int, key_after: str) -> tuple[list[int], Any]:
    """The ids the fair claim takes with no limit at all (nor the paused
    kind's job), and its next key cursors."""
    params = fair_params(slots, key_after)
    with conn.transaction(force_rollback=True):
        conn.execute(sql("pin_plans"))
        conn.execute("DELETE FROM awc.jobs WHERE kind = 'zz-paused'")
        rows = conn.execute(sql("claim_keyed_jobs"), params).fetchall()
    return sorted(row[0] for row in rows if row[0] is not None), rows[-1][14] and json.loads(
        rows[-1][14])


def random_lanes(conn: psycopg.Connection[Any], rng: random.Random, kinds: list[str]) -> list[str]:
    """Up to 40 keys with one to six jobs each over `kinds`, jobs without a
    key, one job in seven of priority 1, one in ten due in an hour. Its keys."""
    conn.execute("DELETE FROM awc.jobs WHERE kind <> 'zz-paused'")
    keys = [f"t{n:03d}" for n in rng.sample(range(200), rng.randint(1, 40))]
    for key in [*keys, None]:
        for _ in range(rng.randint(0 if key is None else 1, 6)):
            conn.execute(
                "INSERT INTO awc.jobs (kind, key, priority, run_at) VALUES (%s, %s, %s, "
                "now() + CASE WHEN %s THEN interval '1 hour' ELSE interval '0' END)",
                (rng.choice(kinds), key, 1 if rng.random() < 0.15 else 0, rng.random() < 0.1))
    conn.execute("ANALYZE awc.jobs")
    return keys


def random_cursor(rng: random.Random, keys: list[str]) -> str:
    return rng.choice(["{}", json.dumps({"~": ["0"], "0": rng.choice(keys)}),
                       json.dumps({"~": ["-1", "0"], "-1": rng.choice(keys),
                                   "0": rng.choice(keys)}),
                       json.dumps({"~": ["0"], "*": rng.choice(keys)})])


def test_the_lanes_claim_what_the_fair_claim_would_when_their_limit_holds_nothing_back(
    conn: psycopg.Connection[Any],
) -> None:
    """Over random queues of three kinds (lanes of each kind and priority),
    random key cursors and slots, with a limit binding on a fourth kind the
    lane claim takes exactly the jobs the fair claim takes with no limit,
    and leaves the same next key cursors."""
    pause_another_kind(conn)
    rng = random.Random(20261207)
    for _ in range(30):
        keys = random_lanes(conn, rng, ["a", "b", "c"])
        for _ in range(3):
            cursor, slots = random_cursor(rng, keys), rng.randint(1, 24)
            ids, mark, _ = lanes_claim(conn, slots, cursor)
            want, want_mark = fair_claim(conn, slots, cursor)
            assert (ids, mark) == (want, want_mark), (keys, cursor, slots)


def test_a_kind_limits_room_is_shared_round_robin_as_the_fair_claims_slots(
    conn: psycopg.Connection[Any],
) -> None:
    """One kind under `max_running` R (none running): the lane claim takes
    what the fair claim takes with R slots (priority first, then the keys in
    turn), and says it held back exactly when ready jobs were left (the
    engine reads that only from a claim with slots to spare)."""
    rng = random.Random(7)
    conn.execute("INSERT INTO awc.limits (scope, name, max_running) VALUES ('kind', 'k', 1)")
    for _ in range(30):
        keys = random_lanes(conn, rng, ["k"])
        room = rng.randint(1, 12)
        conn.execute("UPDATE awc.limits SET max_running = %s WHERE name = 'k'", (room,))
        ready = conn.execute("SELECT count(*) FROM awc.jobs WHERE run_at <= now()").fetchone()
        assert ready is not None
        for _ in range(2):
            # more slots than room: the limit may bind (else the lanes leave
            # the claim to the fair claim, decision 0018's gate)
            cursor, slots = random_cursor(rng, keys), rng.randint(room + 1, 24)
            ids, mark, held_back = lanes_claim(conn, slots, cursor)
            want, want_mark = fair_claim(conn, room, cursor)
            assert (ids, mark) == (want, want_mark), (keys, cursor, slots, room)
            assert held_back == (ready[0] > len(ids)), (room, slots, ready)


def test_the_lane_claim_reads_a_bounded_number_of_keys(conn: psycopg.Connection[Any]) -> None:
    """10,000 keys in one lane under a binding limit: a claim of 64 walks
    65 keys (one probe each), not the lane; its buffers stay within a small
    multiple of a claim over 100 keys."""
    pause_another_kind(conn)

    def cost(keys: int) -> int:
        conn.execute("DELETE FROM awc.jobs WHERE kind <> 'zz-paused'")
        conn.execute("INSERT INTO awc.jobs (kind, key) SELECT 'noop', 't' || g "
                     "FROM generate_series(1, %s) AS g, generate_series(1, 2)", (keys,))
        conn.execute("VACUUM ANALYZE awc.jobs")
        params = fair_params(64, "{}")
        with conn.transaction(force_rollback=True):
            conn.execute(sql("claim_limits"), params)
            top = explained(conn, "claim_limited_jobs", params)
        assert top["Actual Rows"] == 64 + 1
        return read(top)

    small, large = cost(100), cost(10_000)
    assert large <= 2 * small + 200, (small, large)
