"""SPEC §4: enqueue, dedupe, claim, fencing and rescue, statement by statement."""

from __future__ import annotations

import json
import re
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from tests.support import job_row, nested
from tick.admin import cancel
from tick.db import connect
from tick.maintenance import rescue
from tick.producer import enqueue, enqueue_many
from tick.queue import ClaimRequest, Writes, round_trip


def claim(conn: psycopg.Connection[Any], slots: list[str], lease: float = 60) -> list[Any]:
    request = ClaimRequest(slots=slots, lease_secs=lease, cap_secs=lease, leases_json="{}",
                           kinds=None, queues=None)
    return round_trip(conn, Writes(), request).claimed


def complete(conn: psycopg.Connection[Any], job_id: int, token: str, result: Any = None) -> bool:
    writes = Writes()
    writes.complete.append((job_id, token, None if result is None else json.dumps(result)))
    return job_id in round_trip(conn, writes, None).recorded


def expire_lease(conn: psycopg.Connection[Any], job_id: int) -> None:
    conn.execute(
        "UPDATE awc.jobs SET locked_until = now() - interval '1 second' WHERE id = %s", (job_id,)
    )


def test_enqueue_defaults_match_the_spec(conn: psycopg.Connection[Any]) -> None:
    job = job_row(conn, enqueue(conn, "noop"))
    assert (job["state"], job["queue"], job["priority"]) == ("PENDING", "default", 0)
    assert (job["attempts"], job["max_attempts"], job["payload"]) == (0, 5, {})


def test_enqueue_joins_the_callers_transaction(db_url: str) -> None:
    with psycopg.connect(db_url) as producer:  # not autocommit
        job_id = enqueue(producer, "noop")
        producer.rollback()
    with connect(db_url) as conn:
        count = conn.execute("SELECT count(*) FROM awc.jobs WHERE id = %s", (job_id,))
        assert count.fetchone() == (0,)


def test_dedupe_returns_the_live_jobs_id(conn: psycopg.Connection[Any]) -> None:
    first = enqueue(conn, "noop", {"a": 1}, dedupe_key="k")
    assert enqueue(conn, "noop", {"a": 2}, dedupe_key="k") == first
    assert conn.execute("SELECT count(*) FROM awc.jobs").fetchone() == (1,)
    # Once the holder finished, the key is free again.
    conn.execute("UPDATE awc.jobs SET state = 'COMPLETED' WHERE id = %s", (first,))
    assert enqueue(conn, "noop", dedupe_key="k") != first


def test_enqueue_many_returns_ids_in_input_order_in_one_statement(
    conn: psycopg.Connection[Any],
) -> None:
    live = enqueue(conn, "noop", dedupe_key="taken")
    jobs = [
        {"kind": "a", "payload": {"n": 0}},
        {"kind": "b", "dedupe_key": "taken"},
        {"kind": "c", "dedupe_key": "fresh", "priority": 3, "queue": "q"},
        {"kind": "d", "dedupe_key": "fresh"},
        {"kind": "e", "run_at": datetime.now(UTC) + timedelta(hours=1), "max_attempts": 2},
    ]
    ids = enqueue_many(conn, jobs)
    assert ids[1] == live and ids[3] == ids[2]
    kinds = {row[0]: row[1] for row in conn.execute("SELECT id, kind FROM awc.jobs").fetchall()}
    assert [kinds[i] for i in (ids[0], ids[2], ids[4])] == ["a", "c", "e"]
    assert job_row(conn, ids[4])["max_attempts"] == 2
    assert job_row(conn, ids[2])["queue"] == "q"
    assert enqueue_many(conn, []) == []


def test_enqueue_many_refuses_unknown_fields(conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(TypeError, match="unknown job fields 'payloads'"):
        enqueue_many(conn, [{"kind": "a", "payloads": {}}])
    # Any number of keys of any type: the first three, escaped and cut, the
    # rest counted (sorting them failed on mixed types; all were listed).
    hostile: dict[Any, Any] = {"kind": "a", 7: 1, "\x1b]0;pwned\x07" + "x" * 5000: 1}
    hostile.update((f"k{i}", 1) for i in range(10_000))
    with pytest.raises(TypeError) as caught:
        enqueue_many(conn, [hostile])
    message = str(caught.value)
    assert message.startswith("enqueue_many: unknown job fields 7, '\\x1b]0;pwned")
    assert "\x1b" not in message and len(message) < 200 and message.endswith("and 9,999 more")
    assert conn.execute("SELECT count(*) FROM awc.jobs").fetchone() == (0,)


@pytest.mark.parametrize("later, field", [
    ({"kind": "a", "max_attempts": True}, "max_attempts"),  # True == 1, but not an integer
    ({"kind": "a", "priority": 0.0}, "priority"),  # 0.0 == 0, but not an integer
    ({"kind": ["a"]}, "kind"),  # unhashable: checked in full
    ({"kind": "a", "queue": "q\x00"}, "queue"),
])
def test_each_job_of_a_batch_is_checked_even_when_it_looks_like_an_earlier_one(
        conn: psycopg.Connection[Any], later: dict[str, Any], field: str) -> None:
    """enqueue_many checks each distinct (kind, queue, limits) once; a value
    equal to an earlier one but of another type is still its own (SPEC §4.3)."""
    from tick.producer import EnqueueError

    batch = [{"kind": "a", "max_attempts": 1, "priority": 0}] * 100 + [later]
    with pytest.raises(EnqueueError, match=f"^job 100: {field}: "):
        enqueue_many(conn, batch)
    row = conn.execute("SELECT count(*) FROM awc.jobs").fetchone()
    assert row == (0,)


# One INSERT; the COPY path, refused in its first chunk and past several sent.
@pytest.mark.parametrize("size", [3, 200, 3500])
@pytest.mark.parametrize("payload, why", [
    ({"x": float("nan")}, "NaN"), ({"x": "\ud800"}, "surrogate"), ({"x": "\x00"}, "NUL"),
])
def test_a_bad_payload_late_in_a_batch_leaves_the_callers_transaction_as_it_was(
        conn: psycopg.Connection[Any], size: int, payload: dict[str, Any], why: str) -> None:
    """A payload jsonb would refuse is named by its job, and the caller's
    transaction, and what it enqueued before, stay as they were: the COPY
    checks each job as it streams, and a refusal ends it inside a savepoint
    (decision 0006)."""
    from tick.producer import EnqueueError

    with conn.transaction():
        first = enqueue(conn, "noop")
        batch: list[dict[str, Any]] = [{"kind": "noop", "payload": {"n": n}} for n in range(size)]
        batch[-2]["payload"] = payload
        with pytest.raises(EnqueueError, match=f"^job {size - 2}: payload: .*{why}"):
            enqueue_many(conn, batch)
        assert conn.execute("SELECT count(*) FROM awc.jobs").fetchone() == (1,)
        more = enqueue_many(conn, batch[:-2])  # the transaction goes on
    assert conn.execute("SELECT count(*) FROM awc.jobs").fetchone() == (size - 1,)
    assert conn.execute("SELECT min(id) FROM awc.jobs").fetchone() == (first,)
    assert len(set(more)) == size - 2


@pytest.mark.parametrize("autocommit", [False, True])
@pytest.mark.parametrize("late", [
    {"kind": ""},  # a field
    {"kind": "noop", "run_at": datetime(2026, 1, 1, tzinfo=UTC), "priority": 2**15},  # later COPY
    {"kind": "noop", "colour": "red"},  # an unknown field
])
def test_a_refusal_mid_copy_leaves_nothing_and_the_connection_usable(
        conn: psycopg.Connection[Any], db_url: str, autocommit: bool,
        late: dict[str, Any]) -> None:
    """Past the first chunk sent, on a connection in autocommit (the COPY is
    its own transaction) and in the caller's implicit transaction (the COPY
    is in a savepoint): a refused job leaves no row and the session usable."""
    from tick.db import connect
    from tick.producer import EnqueueError

    with connect(db_url) as other:
        other.autocommit = autocommit
        before = other.execute("SELECT count(*) FROM awc.jobs").fetchone()
        batch: list[dict[str, Any]] = [{"kind": "noop", "payload": {"n": n}}
                                       for n in range(2500)]
        batch[2400] = late
        with pytest.raises((EnqueueError, TypeError), match=r"^(job 2400: |enqueue_many: )"):
            enqueue_many(other, batch)
        assert other.execute("SELECT count(*) FROM awc.jobs").fetchone() == before
        assert len(enqueue_many(other, batch[:2400])) == 2400
        other.commit()
    row = conn.execute("SELECT count(*) FROM awc.jobs").fetchone()
    assert row is not None and before is not None and row[0] == before[0] + 2400


def test_a_payload_is_encoded_as_json_dumps_would() -> None:
    """The encoder built once (decision 0006) writes what `json.dumps` with
    awc's options writes, for every kind of value a payload holds."""
    from collections import OrderedDict
    from enum import IntEnum

    from tick.payloads import payload_json

    class Tag(str):
        pass

    class Level(IntEnum):
        HIGH = 3

    payloads: list[dict[Any, Any]] = [
        {"n": 1}, {"f": 0.1, "g": -0.0, "h": 1e300, "i": 2**80, "j": -(2**63)},
        {"t": (1, [2, {"x": None}]), "b": [True, False], "u": "é\u2028\n\"\\\t✓"},
        {Tag("k"): Tag("v"), 1: "int key", 2.5: "float key", None: "null key", False: 0},
        {"o": OrderedDict(b=1, a=2), "e": Level.HIGH, "s": ""},
    ]
    for payload in payloads:
        assert payload_json(payload) == json.dumps(
            payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _circular() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    return loop


@pytest.mark.parametrize(("payload", "why"), [
    (_circular(), "holds itself (a circular reference)"),
    ({"d": nested(5000)}, "nested too deeply"),
    ({"x": [1, float("-inf")]}, "NaN or an infinite"),
    ({"x": {1, 2}}, "is not JSON (Object of type set"),
    ({(1, 2): 3}, "is not JSON (keys must be"),
    ({"x": "\x00"}, "NUL"),
])
@pytest.mark.parametrize("size", [1, 100])  # enqueue, and enqueue_many's COPY
def test_payloads_json_cannot_hold_are_refused_by_job_and_field(
        conn: psycopg.Connection[Any], payload: dict[str, Any], why: str, size: int) -> None:
    """Every payload is encoded with one set of options;
    what JSON or jsonb cannot hold, a payload that holds itself included,
    is refused with a reason, and nothing is stored."""
    from tick.producer import EnqueueError

    with pytest.raises(EnqueueError, match=f"payload: .*{re.escape(why)}"):
        if size == 1:
            enqueue(conn, "k", payload)
        else:
            enqueue_many(conn, [{"kind": "k"}] * (size - 1) + [{"kind": "k", "payload": payload}])
    assert conn.execute("SELECT count(*) FROM awc.jobs").fetchone() == (0,)


def test_payloads_are_stored_as_json_encodes_them(conn: psycopg.Connection[Any]) -> None:
    payload = {"a": [1, 2.5, -0.0, 1e300, None, True], "é": "\u2028\n\t\\", 1: "one",
               "big": 2**70, "b": {"c": {}}}
    ids = [enqueue(conn, "k", payload),
           *enqueue_many(conn, [{"kind": "k", "payload": payload}] * 70)]
    stored = {row[0] for row in conn.execute(
        "SELECT payload::text FROM awc.jobs WHERE id = ANY (%s)", (ids,)).fetchall()}
    expected = conn.execute("SELECT %s::jsonb::text",
                            (json.dumps(payload, ensure_ascii=False),)).fetchone()
    assert expected is not None and stored == {expected[0]}


def test_constraints_reject_bad_rows(conn: psycopg.Connection[Any]) -> None:
    for bad in (
        "INSERT INTO awc.jobs (kind) VALUES ('')",
        "INSERT INTO awc.jobs (kind, max_attempts) VALUES ('k', 0)",
        "INSERT INTO awc.jobs (kind, state) VALUES ('k', 'DONE')",
    ):
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute(bad)


def test_claim_takes_ready_jobs_by_priority_then_age(conn: psycopg.Connection[Any]) -> None:
    low = enqueue(conn, "noop")
    high = enqueue(conn, "noop", priority=5)
    enqueue(conn, "noop", run_at=datetime.now(UTC) + timedelta(hours=1))
    rows = claim(conn, ["w-1"])
    assert [r.id for r in rows] == [high]
    rows = claim(conn, ["w-1", "w-2"])
    assert [r.id for r in rows] == [low]  # the future job is not claimable
    job = job_row(conn, low)
    assert job["state"] == "RUNNING" and job["attempts"] == 1
    assert job["locked_by"] == "w-1" and str(job["claim_token"]) == rows[0].token


def test_claim_names_each_job_after_its_slot(conn: psycopg.Connection[Any]) -> None:
    enqueue_many(conn, [{"kind": "noop"}] * 3)
    rows = claim(conn, ["w-1", "w-2", "w-3"])
    assert sorted(r.slot for r in rows) == ["w-1", "w-2", "w-3"]
    for r in rows:
        assert job_row(conn, r.id)["locked_by"] == r.slot


def test_claim_lease_never_exceeds_the_cap(conn: psycopg.Connection[Any]) -> None:
    enqueue(conn, "noop")
    request = ClaimRequest(slots=["w-1"], lease_secs=300, cap_secs=2.5, leases_json="{}",
                           kinds=None, queues=None)
    (row,) = round_trip(conn, Writes(), request).claimed
    assert row.lease_s <= 2.5
    left = conn.execute("SELECT extract(epoch FROM locked_until - now()) FROM awc.jobs").fetchone()
    assert left is not None and float(left[0]) <= 2.5


def test_two_claimers_racing_for_one_job_exactly_one_wins(db_url: str) -> None:
    rounds = 40
    with connect(db_url) as setup:
        for _ in range(rounds):
            setup.execute("DELETE FROM awc.jobs")
            enqueue(setup, "noop")
            barrier = threading.Barrier(2)
            won: list[int] = []

            def claimer(name: str, barrier: threading.Barrier = barrier,
                        won: list[int] = won) -> None:
                with connect(db_url) as c:
                    barrier.wait()
                    won.extend(r.id for r in claim(c, [name]))

            threads = [threading.Thread(target=claimer, args=(f"w-{n}",)) for n in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=10)
            assert len(won) == 1
            assert setup.execute("SELECT attempts FROM awc.jobs").fetchone() == (1,)


def test_fenced_complete_after_rescue_writes_nothing(conn: psycopg.Connection[Any]) -> None:
    job_id = enqueue(conn, "noop")
    (stale,) = claim(conn, ["old-1"])
    expire_lease(conn, job_id)
    assert rescue(conn) == (1, 0)
    assert job_row(conn, job_id)["state"] == "PENDING"
    (fresh,) = claim(conn, ["new-1"])
    assert fresh.token != stale.token and fresh.attempts == 2
    assert complete(conn, job_id, fresh.token, {"by": "new"})
    # The stale holder finally finishes: its write matches nothing.
    assert not complete(conn, job_id, stale.token, {"by": "old"})
    job = job_row(conn, job_id)
    assert job["state"] == "COMPLETED" and job["result"] == {"by": "new"}


def test_fenced_write_after_cancel_writes_nothing(conn: psycopg.Connection[Any]) -> None:
    job_id = enqueue(conn, "noop")
    (row,) = claim(conn, ["w-1"])
    cancel(conn, job_id)
    assert not complete(conn, job_id, row.token, {"late": True})
    job = job_row(conn, job_id)
    assert job["state"] == "CANCELLED" and job["result"] is None


def test_rescue_vs_complete_race_never_yields_two_outcomes(db_url: str) -> None:
    jobs = 150
    with connect(db_url) as conn:
        ids = enqueue_many(conn, [{"kind": "noop"}] * jobs)
        rows = {r.id: r for r in claim(conn, [f"w-{n}" for n in range(jobs)])}
        conn.execute("UPDATE awc.jobs SET locked_until = now() - interval '1 second'")
    barrier = threading.Barrier(2)
    completed: set[int] = set()
    rescued: set[int] = set()

    def completer() -> None:
        with connect(db_url) as c:
            barrier.wait()
            for job_id in ids:
                if complete(c, job_id, rows[job_id].token, {"ok": True}):
                    completed.add(job_id)

    def rescuer() -> None:
        with connect(db_url) as c:
            barrier.wait()
            while True:
                got = c.execute(
                    "UPDATE awc.jobs SET state = 'PENDING', claim_token = NULL "
                    "WHERE id = (SELECT id FROM awc.jobs WHERE state = 'RUNNING' "
                    "AND locked_until < now() ORDER BY id DESC LIMIT 1 FOR UPDATE SKIP LOCKED) "
                    "RETURNING id"
                ).fetchone()
                if got is None:
                    break
                rescued.add(int(got[0]))

    threads = [threading.Thread(target=completer), threading.Thread(target=rescuer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert completed.isdisjoint(rescued)
    assert completed | rescued == set(ids)
    with connect(db_url) as conn:
        states = dict(conn.execute("SELECT id, state FROM awc.jobs").fetchall())
    assert all(states[i] == "COMPLETED" for i in completed)
    assert all(states[i] == "PENDING" for i in rescued)


def test_rescue_dead_letters_a_job_whose_attempts_are_spent(conn: psycopg.Connection[Any]) -> None:
    job_id = enqueue(conn, "noop", max_attempts=1)
    claim(conn, ["w-1"])
    expire_lease(conn, job_id)
    assert rescue(conn) == (0, 1)
    job = job_row(conn, job_id)
    assert job["state"] == "FAILED" and job["last_error"].startswith("LeaseExpired:")
    assert job["claim_token"] is None


def test_rescue_leaves_live_leases_alone(conn: psycopg.Connection[Any]) -> None:
    job_id = enqueue(conn, "noop")
    claim(conn, ["w-1"])
    assert rescue(conn) == (0, 0)
    assert job_row(conn, job_id)["state"] == "RUNNING"


def test_a_plain_sql_insert_is_a_valid_enqueue(conn: psycopg.Connection[Any]) -> None:
    conn.execute("INSERT INTO awc.jobs (kind, payload) VALUES ('noop', '{}')")
    (row,) = claim(conn, ["w-1"])
    assert row.kind == "noop" and row.payload == "{}"


def test_insert_notifies_awc_jobs(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True) as listener, connect(db_url) as producer:
        listener.execute("LISTEN awc_jobs")
        enqueue_many(producer, [{"kind": "noop"}] * 3)
        notes = list(listener.notifies(timeout=5, stop_after=1))
        assert [n.channel for n in notes] == ["awc_jobs"]


def test_enqueue_many_copy_path_keeps_order_and_content(conn: psycopg.Connection[Any]) -> None:
    later = datetime.now(UTC) + timedelta(hours=2)
    jobs = [
        {"kind": f"k\t{n}\\x\n", "payload": {"text": f"a\\b\"c\td\u00e9 {n}", "n": n},
         "priority": n % 3, "queue": "q\\1", "max_attempts": 1 + n % 4,
         **({"run_at": later} if n % 5 == 0 else {})}
        for n in range(300)
    ]
    ids = enqueue_many(conn, jobs)
    assert ids == sorted(ids) and len(set(ids)) == 300
    for job_id, job in zip(ids, jobs, strict=True):
        row = job_row(conn, job_id)
        assert (row["kind"], row["payload"], row["priority"], row["queue"],
                row["max_attempts"]) == (job["kind"], job["payload"], job["priority"],
                                         job["queue"], job["max_attempts"])
        assert (row["run_at"] == later) == ("run_at" in job)


def test_enqueue_many_copy_path_formats_each_shape_as_its_own(
        conn: psycopg.Connection[Any]) -> None:
    """The COPY builds the text around a payload once per combination of
    checked fields (tick.copy_in.copy_many); every job still carries its
    own: three shapes interleaved; values of a str subclass that calls
    every value equal, which are never shared between jobs; and text COPY's
    format escapes (tab, newline, backslash), stored as given."""

    class Alike(str):
        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return 0

    shapes = [{"kind": "a", "queue": "q1", "priority": 1, "timeout_secs": 2.5, "key": "t1"},
              {"kind": "b", "queue": "q2", "max_attempts": 3},
              {"kind": "a", "queue": "q1", "priority": 1, "timeout_secs": 2, "key": "t2"}]
    jobs: list[dict[str, Any]] = [{**shapes[n % 3], "payload": {"n": n}} for n in range(150)]
    # A bare job (a kind, perhaps a payload: the check's shortcut by kind)
    # between jobs of the same kind with fields of their own, both ways round.
    jobs[1:1] = [{"kind": "a"}, {"kind": "a", "payload": {"bare": 1}}]
    jobs += [{"kind": "a", "payload": {"bare": 2}}, {"kind": "a", "priority": 7},
             {"kind": "a", "payload": {}, "queue": "q9"}, {"kind": "b"}]
    jobs += [{"kind": Alike(f"alike-{n}"), "payload": {"n": n}} for n in range(80)]
    jobs += [{"kind": f"tab\there-{n}", "queue": "new\nline", "key": "back\\slash ünï",
              "payload": {"text": "a\tb\\c\nd\re \\N ✓", "n": n}} for n in range(3)]
    ids = enqueue_many(conn, jobs)
    rows = {r[0]: r[1:] for r in conn.execute(
        "SELECT id, kind, queue, priority, timeout_secs, key, max_attempts, payload "
        "FROM awc.jobs WHERE id = ANY (%s)", (ids,)).fetchall()}
    for job_id, job in zip(ids, jobs, strict=True):
        assert rows[job_id] == (str(job["kind"]), job.get("queue", "default"),
                                job.get("priority", 0), job.get("timeout_secs"),
                                job.get("key"), job.get("max_attempts", 5),
                                job.get("payload", {}))


@pytest.mark.parametrize("values", [
    [], ["plain"], ["a,b", 'say "hi"', "back\\slash", "{braces}", " spaced ", "NULL", ""],
    [None, '{"k": "v \\" \\\\ ,}"}', None], ["ünïcødé", "tab\there", "new\nline"],
])
def test_an_array_literal_reads_back_as_the_values(
    conn: psycopg.Connection[Any], values: list[str | None]
) -> None:
    """The claim's slots and the completions' tokens and results travel as one
    array literal (tick.queue.array_literal, decision 0037): whatever the
    text, the server reads back exactly the values."""
    from tick.queue import array_literal

    row = conn.execute("SELECT %s::text[]", (array_literal(values),)).fetchone()
    assert row is not None and row[0] == values


def test_completions_with_results_of_every_shape_land_by_literal(
    conn: psycopg.Connection[Any],
) -> None:
    results = [None, '{"quote": "\\"", "slash": "\\\\", "comma": ",", "brace": "}"}', "[1, 2]",
               '"NULL"', "null"]
    ids = enqueue_many(conn, [{"kind": "k"}] * len(results))
    claimed = round_trip(conn, Writes(), ClaimRequest(
        [f"w-{n}" for n in range(len(ids))], 60.0, 60.0, "{}", None, None)).claimed
    by_id = {row.id: row for row in claimed}
    writes = Writes(complete=[(i, by_id[i].token, r) for i, r in zip(ids, results, strict=True)])
    recorded = round_trip(conn, writes, None).recorded
    assert sorted(recorded) == sorted(ids)
    for job_id, result in zip(ids, results, strict=True):
        stored = job_row(conn, job_id)["result"]
        assert stored == (None if result is None else json.loads(result)), job_id
