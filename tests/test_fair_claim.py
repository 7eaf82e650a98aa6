"""SPEC §23 (docs/decisions/0034): a claim takes ready jobs of one priority
round-robin across keys, so a key with a deep backlog does not delay another
key's jobs by more than one claim; priority still wins; jobs without a key
are one key; with no keyed job ready the claim is the plain walk.

Each test drives the real claim round trip (`tick.queue.round_trip` with the
claimer's `Cursor`, as the engine does) against PostgreSQL.
"""

from __future__ import annotations

import json
import time
from typing import Any

import psycopg

from tests.claiming import claim_fairly as claim
from tests.claiming import enqueue_keyed as enqueue
from tests.claiming import explained, fair_params, keys_of, read
from tests.support import scans
from tick.engine.cursor import Cursor
from tick.queue import ClaimRequest, FairAnswer, Writes, round_trip
from tick.statements import sql


def test_a_small_key_runs_in_the_first_claim_behind_a_big_keys_backlog(
    conn: psycopg.Connection[Any],
) -> None:
    """Key A's 2,000 ready jobs were enqueued first; all ten of key B's are
    claimed in the first claim, half of its slots going to each key."""
    enqueue(conn, 2000, "A")
    b = enqueue(conn, 10, "B")
    got = claim(conn, Cursor(), 20)
    assert len(got) == 20
    assert set(b) <= set(got)
    assert keys_of(conn, got).count("A") == 10


def test_three_keys_interleave_within_one_claim(conn: psycopg.Connection[Any]) -> None:
    a = enqueue(conn, 5, "a")
    b = enqueue(conn, 5, "b")
    c = enqueue(conn, 5, "c")
    got = claim(conn, Cursor(), 9)
    # Each key's first three, and no key a second job while another had none.
    assert sorted(got) == sorted(a[:3] + b[:3] + c[:3])


def test_jobs_without_a_key_are_one_key(conn: psycopg.Connection[Any]) -> None:
    plain = enqueue(conn, 50, None)
    keyed = enqueue(conn, 50, "tenant-1")
    got = claim(conn, Cursor(), 10)
    assert sorted(got) == sorted(plain[:5] + keyed[:5])


def test_priority_still_wins_over_fairness(conn: psycopg.Connection[Any]) -> None:
    low = enqueue(conn, 5, "small", priority=0)
    high = enqueue(conn, 20, "big", priority=5)
    got = claim(conn, Cursor(), 10)
    assert sorted(got) == high[:10]
    got = claim(conn, Cursor(), 20)
    assert sorted(got) == sorted(high[10:] + low)


def test_more_keys_than_slots_take_turns_across_claims(conn: psycopg.Connection[Any]) -> None:
    """The key cursor rotates: keys late in sort order are served in the
    next claims, not starved by the early ones' backlogs."""
    for n in range(12):
        enqueue(conn, 3, f"k{n:02d}")
    cursor = Cursor()
    served: list[str | None] = []
    for _ in range(3):
        got = claim(conn, cursor, 4)
        keys = keys_of(conn, got)
        assert len(set(keys)) == 4  # one job per key while other keys wait
        served += keys
    assert sorted(str(k) for k in served) == [f"k{n:02d}" for n in range(12)]


def test_one_keys_trickle_of_higher_priority_jobs_starves_no_key_below(
    conn: psycopg.Connection[Any],
) -> None:
    """One key cursor for all priorities: a claim that served only key m's
    priority-5 job set it to m, and each claim of priority 0 after it
    started after m; with one slot (a loop as its jobs finish), key n was
    served every time and the keys before m never. Each priority keeps its
    own cursor now."""
    below = [f"{c}" for c in "abcdnopq"]
    for key in below:
        enqueue(conn, 3, key, priority=0)
    cursor = Cursor()
    served: list[str | None] = []
    for _ in range(len(below)):
        enqueue(conn, 1, "m", priority=5)
        assert keys_of(conn, claim(conn, cursor, 1)) == ["m"]
        served += keys_of(conn, claim(conn, cursor, 1))
    assert sorted(str(k) for k in served) == below  # each key once, in 8 claims


def test_a_key_cursor_a_run_left_before_cursors_by_priority_still_starts_the_rotation(
    conn: psycopg.Connection[Any],
) -> None:
    """A history row of an earlier version keeps one key, not an object of
    them: a new process starts every priority after it."""
    for key in "abc":
        enqueue(conn, 1, key)
    cursor = Cursor()
    cursor.seed_key("a")
    assert keys_of(conn, claim(conn, cursor, 1)) == ["b"]
    assert json.loads(cursor.key_after) == {"*": "a", "0": "b", "~": ["0"]}


def test_a_key_cursor_no_awc_writes_starts_the_rotation_afresh() -> None:
    """A history row's cursor from another version (or by hand): one that
    nested a JSON text of cursors as one key grew twice each run (84 MB,
    3 s a tick); anything but the two shapes awc writes is no cursor."""
    from tick.engine.cursor import key_cursors

    written = json.dumps({"*": "a", "0": "b", "-5": "m", "~": ["0", "-5"]})
    assert key_cursors(written) == written
    assert json.loads(key_cursors("tenant-7")) == {"*": "tenant-7"}  # one key, before
    nested = json.dumps({"*": json.dumps({"*": "a" * 190, "~": ["0"]})})  # past a key
    for stored in (nested, "k" * 201, '{"0": 5}', '{"x": "a"}', '{"~": [0]}', "[" * 5000,
                   json.dumps({str(p): "k" for p in range(70)}),
                   # JSON text that jsonb refuses: every claim after failed
                   '{"~": ["0"], "0": "k050\\u0000"}', '{"~": ["0"], "0": "\\ud800"}',
                   '{"*": "\\udc80"}'):
        assert key_cursors(stored) == "{}", stored[:50]


def test_the_key_cursors_keep_the_64_priorities_served_last(
        conn: psycopg.Connection[Any]) -> None:
    """A producer that uses a new priority for every job cannot grow the
    cursors each claim sends and the history keeps; and the busy priority's
    rotation is not the one dropped (past 64 all but the default were: a
    producer cycling 100 priorities reset priority 0's rotation every few
    claims, and its tenants late in sort order were never served)."""
    keys = [f"k{n:02d}" for n in range(12)]
    for key in keys:
        enqueue(conn, 1, key)
    cursor = Cursor()
    served: list[str | None] = []
    for n in range(12):
        for p in range(8 * n + 1, 8 * n + 9):  # eight new priorities between two claims
            enqueue(conn, 1, "x", priority=p)
            assert keys_of(conn, claim(conn, cursor, 1)) == ["x"]
        served += keys_of(conn, claim(conn, cursor, 1))
        got = json.loads(cursor.key_after)
        assert len(got["~"]) <= 64 and set(got) - {"*", "~"} == set(got["~"])
    assert sorted(str(k) for k in served) == keys  # each once: the rotation went on


def test_a_key_whose_jobs_are_due_later_does_not_stop_the_claim(
    conn: psycopg.Connection[Any],
) -> None:
    enqueue(conn, 5, "later", run_at="infinity")
    now = enqueue(conn, 3, "now")
    plain = enqueue(conn, 3, None)
    assert sorted(claim(conn, Cursor(), 10)) == sorted(now + plain)


def test_the_kind_filter_holds_in_the_fair_claim(conn: psycopg.Connection[Any]) -> None:
    enqueue(conn, 5, "a")
    other = [row[0] for row in conn.execute(
        "INSERT INTO awc.jobs (kind, key) SELECT 'other', 'b' FROM generate_series(1, 5) "
        "RETURNING id").fetchall()]
    assert sorted(claim(conn, Cursor(), 10, kinds=["other"])) == sorted(other)


def test_concurrent_claimers_take_disjoint_jobs(db_url: str,
                                                conn: psycopg.Connection[Any]) -> None:
    for key in ("a", "b", "c"):
        enqueue(conn, 40, key)
    with psycopg.connect(db_url, autocommit=True) as other:
        mine, theirs = Cursor(), Cursor()
        got: list[int] = []
        for _ in range(20):
            got += claim(conn, mine, 5) + claim(other, theirs, 5)
    assert len(got) == len(set(got)) == 120


def test_with_no_keyed_job_ready_the_plain_walk_claims(conn: psycopg.Connection[Any]) -> None:
    ids = enqueue(conn, 25, None)
    enqueue(conn, 3, "later", run_at="infinity")
    cursor = Cursor()
    assert claim(conn, cursor, 10) == ids[:10]
    # The plain walk moved its cursor (the fair claim never does).
    assert cursor.after[2] == ids[10] - 1
    assert conn.execute("SELECT current_setting('awc.keyed_claimed', true)").fetchone() in (
        (None,), ("",))


def test_the_gate_hands_keyed_jobs_to_the_fair_claim_and_back(
    conn: psycopg.Connection[Any],
) -> None:
    """After a claim that was not fair, only the fair claim's gate is sent:
    it finds a keyed job ready, so the walk takes nothing (no keyed job is
    claimed outside the round-robin) and the answer asks for the fair claim
    at once. That one is sent without the walk; once no keyed job is ready
    it claims nothing and hands back to the walk, at once too."""
    keyed = enqueue(conn, 3, "k")
    plain = enqueue(conn, 3, None)

    def send(fair: bool) -> tuple[list[int], FairAnswer]:
        request = ClaimRequest(slots=[f"s{i}" for i in range(10)], lease_secs=60.0,
                               cap_secs=60.0, leases_json="{}", kinds=None, queues=None,
                               cursor=Cursor().params(time.monotonic()), fair=fair)
        done = round_trip(conn, Writes(), request)
        return [row.id for row in done.claimed], done.fair

    assert send(False) == ([], FairAnswer(next=True, more=True, again=True))
    got, answer = send(True)
    assert sorted(got) == sorted(keyed + plain)
    assert (answer.next, answer.more) == (True, False)
    assert send(True) == ([], FairAnswer(next=False, more=True, again=True, key=None))
    more = enqueue(conn, 2, None)
    assert send(False) == (more, FairAnswer())


def test_the_gate_reads_one_index_probe(conn: psycopg.Connection[Any]) -> None:
    """The gate, sent with nearly every claim of a queue without keys, is
    one probe of jobs_keyed_idx (decision 0034), as its generic plan."""
    enqueue(conn, 500, None)
    enqueue(conn, 3, "k")
    conn.execute("ANALYZE awc.jobs")
    with conn.transaction(force_rollback=True):
        conn.execute(sql("pin_plans"))
        conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql("claim_keyed_gate"),
                           {"slots": ["s0"]}).fetchone()
    assert row is not None
    text = json.dumps(row[0])
    assert [index for _, index in scans(text)] == ["jobs_keyed_idx"], text


def ranked(conn: psycopg.Connection[Any], slots: int, kinds: list[str] | None,
           key_after: str | None = None, key_pass: bool = True) -> dict[str, int]:
    """Which of the fair claim's ranking steps ran (their rows) in one claim
    of `slots` slots, and how many jobs it claimed: EXPLAIN ANALYZE of its
    generic plan, rolled back."""
    params = fair_params(slots, key_after, kinds=kinds, key_pass=key_pass)
    with conn.transaction(force_rollback=True):
        conn.execute(sql("pin_plans"))
        row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql("claim_keyed_jobs"),
                           params).fetchone()
    assert row is not None
    ran: dict[str, int] = {}

    def walk(node: dict[str, Any]) -> None:
        name = node.get("Subplan Name", "")
        if name.startswith("CTE "):
            ran[name[4:]] = int(node.get("Actual Rows", 0)) if node.get("Actual Loops") else -1
        for child in node.get("Plans", []):
            walk(child)

    walk(row[0][0]["Plan"])
    return ran


def test_a_key_for_every_slot_skips_the_ranking(conn: psycopg.Connection[Any]) -> None:
    """With a ready key for every slot in one priority and nothing to filter
    or limit, round-robin gives each key its head, which the walk of keys
    already read: the claim takes those and never runs its ranking (the
    windows and sorts of `found`, `seen` and `ordered`, decision 0034).
    With fewer keys than slots, or a kind filter, it ranks as before."""
    for n in range(12):
        enqueue(conn, 2, f"k{n:02d}")
    many = ranked(conn, 8, None)
    assert many["chosen"] == 8 and many["claimed"] == 8, many
    assert many["found"] == many["seen"] == many["ordered"] == -1, many  # never executed
    few = ranked(conn, 16, None)
    assert few["claimed"] == 16 and few["found"] == 12 and few["ordered"] == 24, few
    filtered = ranked(conn, 8, ["noop"])
    assert filtered["claimed"] == 8 and filtered["found"] >= 8, filtered


def claim_reads(conn: psycopg.Connection[Any], slots: int, key_after: str,
                kinds: list[str] | None = None) -> tuple[int, int]:
    """The buffers one fair claim of `slots` slots reads from the key cursor
    `key_after`, and how many jobs it claims: EXPLAIN ANALYZE of its generic
    plan, rolled back."""
    params = fair_params(slots, json.dumps({"*": key_after}), kinds=kinds)
    top = explained(conn, "claim_keyed_jobs", params)
    return read(top), int(top["Actual Rows"]) - 1  # the last row carries the key cursor


def test_keys_whose_jobs_are_all_due_later_cost_the_walk_no_probe_each(
    conn: psycopg.Connection[Any],
) -> None:
    """Many tenants with a job scheduled for tomorrow, and one with thousands
    of them, between the keys that have work now: the walk of keys passes
    them inside the index (by run_at), so the claim reads about what it
    reads without them, from any key cursor. It read a descent and a heap
    page per such key, and, past its cursor in the wrap, every later entry
    with a heap visit each: 20 s to drain 2,000 jobs behind 200,000 such
    keys, 1.2 s behind one key of 300,000 (decision 0034)."""
    enqueue(conn, 1, "a-now")
    enqueue(conn, 1, "z-now")
    cursors = ("", "a-now", "m-0500", "z-now")
    before = {k: claim_reads(conn, 8, k) for k in cursors}
    assert all(claimed == 2 for _, claimed in before.values()), before
    conn.execute("INSERT INTO awc.jobs (kind, key, run_at) SELECT 'noop', "
                 "'m-' || lpad(n::text, 4, '0'), now() + interval '1 day' "
                 "FROM generate_series(1, 2000) AS n")
    enqueue(conn, 3000, "n-big", run_at="infinity")
    conn.execute("ANALYZE awc.jobs")
    for k in cursors:
        reads, claimed = claim_reads(conn, 8, k)
        assert claimed == 2, (k, claimed)
        assert reads < before[k][0] + 150, (k, reads, before[k])


def test_a_kind_filter_passes_keys_without_its_kind_in_one_read_on(
    conn: psycopg.Connection[Any],
) -> None:
    """`awc tick --kind X` (or `--queue`) while thousands of tenants have
    work of other kinds ready: after a key without a job of the filter, the
    walk reads on to the next key that has one, in one index scan, checking
    each entry passed against the filter on its heap row. It probed each
    such key twice (its head, then its range for the kind):
    4.1 s to drain 2,000 jobs of one key past 20,000 such keys, 38.7 s past
    200,000 (decision 0034)."""
    conn.execute("INSERT INTO awc.jobs (kind, key) SELECT 'other', "
                 "'m-' || lpad(n::text, 4, '0') FROM generate_series(1, 2000) AS n")
    enqueue(conn, 1, "a-now")
    enqueue(conn, 1, "z-now")
    conn.execute("ANALYZE awc.jobs")
    for k in ("", "a-now", "m-0500", "z-now"):
        reads, claimed = claim_reads(conn, 8, k, kinds=["noop"])
        assert claimed == 2, (k, claimed)
        # The entries passed share their heap pages (2,000 jobs inserted
        # together): about 100 buffers here; a probe and a range read per
        # key passed came to 4,000 and more.
        assert reads < 600, (k, reads)


def test_many_keys_with_few_jobs_each_are_read_in_one_pass(
    conn: psycopg.Connection[Any],
) -> None:
    """A tenant per customer, a few jobs each: the claim reads the keys'
    heads in one pass of the key index from the cursor (`dense`) and never
    runs the walk of keys, a probe per key (decision 0034). With more jobs
    per key than the pass reads, fewer keys than slots, or a kind filter,
    the walk decides."""
    for n in range(40):
        enqueue(conn, 2, f"k{n:02d}")
    conn.execute("ANALYZE awc.jobs")
    dense = ranked(conn, 8, None)
    assert dense["dense"] == 8 and dense["claimed"] == 8, dense
    assert dense["groups"] == 0, dense  # the walk's first step found its gate shut
    assert ranked(conn, 64, None)["groups"] > 0  # 40 keys, 64 slots
    filtered = ranked(conn, 8, ["noop"])
    assert filtered["dense"] == 0 and filtered["groups"] >= 8, filtered
    conn.execute("TRUNCATE awc.jobs")
    for n in range(40):
        enqueue(conn, 6, f"k{n:02d}")  # 32 entries hold 6 keys, not 8
    deep = ranked(conn, 8, None)
    assert deep["dense"] == 6 and deep["groups"] >= 8 and deep["claimed"] == 8, deep


def _fair_claim(conn: psycopg.Connection[Any], text: str, slots: int,
                key_after: str) -> tuple[list[int], tuple[Any, ...]]:
    """The ids one fair claim statement `text` takes and its last row (the
    key cursors it gives back, held_back, fair, more, dense), rolled back."""
    params = fair_params(slots, key_after)
    with conn.transaction(force_rollback=True):
        conn.execute(sql("pin_plans"))
        rows = conn.execute(text, params).fetchall()
    return sorted(row[0] for row in rows if row[0] is not None), rows[-1][14:]


def test_the_one_pass_read_of_heads_claims_what_the_walk_of_keys_would(
    conn: psycopg.Connection[Any],
) -> None:
    """The one-pass read (`dense`) is only a cheaper way to the walk's
    answer: over random queues (keys with one to six jobs, jobs without a
    key, a second priority, keys whose first jobs are due later) and random
    key cursors, the claim takes the same jobs and leaves the same key
    cursors as the same statement with that read turned off."""
    import random

    full = sql("claim_keyed_jobs")
    walk_only = full.replace("LIMIT 4 * plan.want", "LIMIT 0")
    assert walk_only != full
    rng = random.Random(20261206)
    dense_used = 0
    for _ in range(40):
        keys = random_queue(conn, rng)
        for _ in range(3):
            cursor = rng.choice(["{}", json.dumps({"*": rng.choice(keys)}),
                                 json.dumps({"0": rng.choice(keys), "-1": rng.choice(keys)})])
            slots = rng.randint(1, 24)
            ids, row = _fair_claim(conn, full, slots, cursor)
            walked, walked_row = _fair_claim(conn, walk_only, slots, cursor)
            # The same jobs and key cursors (and held_back, fair, more);
            # `dense` says which read answered.
            assert (ids, row[:4]) == (walked, walked_row[:4]), (keys, cursor, slots)
            dense_used += ranked(conn, slots, None, cursor).get("dense", 0) == slots
    assert dense_used >= 10  # the one-pass read answered often enough to be tested



def random_queue(conn: psycopg.Connection[Any], rng: Any) -> list[str]:
    """A queue of its own, at random: up to 60 keys with one to six jobs
    each, jobs without a key, one job in seven of priority 1, one in ten due
    in an hour. Its keys."""
    conn.execute("TRUNCATE awc.jobs")
    keys = [f"t{n:03d}" for n in rng.sample(range(200), rng.randint(1, 60))]
    for key in [*keys, None]:
        for _ in range(rng.randint(0 if key is None else 1, 6)):
            later = rng.random() < 0.1
            conn.execute(
                "INSERT INTO awc.jobs (kind, key, priority, run_at) VALUES ('noop', %s, %s, "
                "now() + CASE WHEN %s THEN interval '1 hour' ELSE interval '0' END)",
                (key, 1 if rng.random() < 0.15 else 0, later))
    conn.execute("ANALYZE awc.jobs")
    return keys


def test_the_short_form_claims_what_the_full_fair_claim_would_or_nothing(
    conn: psycopg.Connection[Any],
) -> None:
    """claim_dense_jobs.sql, sent when the last fair claim's one-pass read
    held: over random queues and key cursors it either claims exactly what
    the full fair claim would (the same jobs, the same next key cursors) or
    claims nothing and says `dense` false, so that the engine sends the full
    claim at once; never a different set."""
    import random

    full, short = sql("claim_keyed_jobs"), sql("claim_dense_jobs")
    rng = random.Random(61)
    held = declined = 0
    for _ in range(40):
        keys = random_queue(conn, rng)
        for _ in range(3):
            cursor = rng.choice([
                "{}", json.dumps({"~": ["0"], "0": rng.choice(keys)}),
                json.dumps({"~": ["-1", "0"], "-1": rng.choice(keys), "0": rng.choice(keys)}),
                json.dumps({"~": ["0"], "0": rng.choice(keys), "*": rng.choice(keys)}),
                json.dumps({"~": ["0"], "*": rng.choice(keys)})])
            slots = rng.randint(1, 10)
            ids, (mark, held_back, fair, more, dense) = _fair_claim(conn, short, slots, cursor)
            assert held_back is False
            if dense:
                held += 1
                want_ids, want_row = _fair_claim(conn, full, slots, cursor)
                assert ids == want_ids and len(ids) == slots, (keys, cursor, slots)
                assert json.loads(mark) == json.loads(want_row[0]), (mark, want_row)
                assert want_row[4] is True  # the full claim says the short form would do
            else:
                declined += 1
                assert ids == [] and mark is None, (ids, mark)
                assert more is fair  # a keyed job ready: claim again at once, in full
    assert held >= 10 and declined >= 10, (held, declined)


def test_a_drain_of_many_keys_goes_on_in_the_short_form_and_back(
    conn: psycopg.Connection[Any],
) -> None:
    """The engine's choice between the fair claim's forms (tick/engine/
    claims.py), claim after claim over 300 keys of two jobs: after the first
    full claim the short form claims, the wrap past the last key goes back
    to the full claim once and then to the short form, and every job is
    claimed once, each key's first job before any key's second."""
    from tick.engine.claims import Claims
    from tick.engine.spec import RunSpec

    first = [enqueue(conn, 2, f"k{n:03d}")[0] for n in range(300)]
    conn.execute("ANALYZE awc.jobs")
    claims = Claims(RunSpec(), [f"s{i}" for i in range(32)], "{}")
    forms: list[str] = []
    taken: set[int] = set()
    unfirst = set(first)
    while len(taken) < 600:
        request = claims.request(time.monotonic())
        assert request is not None and len(forms) < 100
        forms.append("short" if request.dense else "full" if request.fair else "gate")
        done = round_trip(conn, Writes(), request)
        claims.took(request, done.claimed, done.held_back, done.mark, done.fair)
        batch = {row.id for row in done.claimed}
        assert not batch & taken
        taken |= batch
        unfirst -= batch
        # A key's second job only in a claim that took the last first jobs.
        assert not unfirst or batch <= set(first), (len(forms), len(unfirst))
        for row in done.claimed:
            claims.release(row.slot)
    assert forms.count("short") >= 15, forms
    assert forms.count("full") <= 4, forms


def test_with_fewer_keys_than_slots_the_next_claim_skips_the_one_pass_read(
    conn: psycopg.Connection[Any],
) -> None:
    """One tenant's flood beside a few others: fewer ready keys than slots,
    so the one-pass read could never find a head for every slot. The fair
    claim says so (`dense` null), the engine's cursor turns the read off
    for its next fair claim (`key_pass`), and a claim that finds a key for
    every slot again turns it back on (`dense` false: keys enough)."""
    enqueue(conn, 500, "flood")
    for n in range(5):
        enqueue(conn, 1, f"small-{n}")
    conn.execute("ANALYZE awc.jobs")
    ids, row = _fair_claim(conn, sql("claim_keyed_jobs"), 32, "{}")
    assert len(ids) == 32 and row[4] is None, row
    assert ranked(conn, 32, None, None, key_pass=False)["dense"] == 0
    # On, the read finds one head: the flood's entries fill its 128.
    assert ranked(conn, 32, None, None)["dense"] == 1
    cursor = Cursor()
    claim(conn, cursor, 32)
    assert cursor.key_pass is False
    for n in range(40):
        enqueue(conn, 10, f"many-{n:02d}")  # 40 keys of 10: too deep for the read
    claim(conn, cursor, 32)
    assert cursor.key_pass is True
    ids, row = _fair_claim(conn, sql("claim_keyed_jobs"), 32, "{}")
    assert row[4] is False, row
