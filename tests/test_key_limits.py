"""SPEC §23 over real processes: per-key limits (`key:NAME`, `key:*`,
`kind:NAME --per-key`) hold exactly while several `awc tick` processes
drain several keys at once, counted from the handlers' own run times and
sampled from the database throughout; and the limits CLI round-trips them."""

from __future__ import annotations

import json
import threading
from typing import Any

import psycopg

from tests.support import run_awc, spawn
from tick.producer import enqueue_many


def drain_with_ticks(env: dict[str, str], n: int) -> None:
    procs = [spawn(env, "tick", "--json") for _ in range(n)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err


def most_at_once_by_key(conn: psycopg.Connection[Any]) -> dict[str, int]:
    """Per key, the most `timed` handlers that ran at one instant."""
    rows = conn.execute("SELECT j.key, i.started, i.ended FROM test_intervals AS i "
                        "JOIN awc.jobs AS j ON j.id = i.job_id").fetchall()
    peaks: dict[str, int] = {}
    for key in {r[0] for r in rows}:
        edges = sorted([(s, 1) for k, s, _ in rows if k == key]
                       + [(e, -1) for k, _, e in rows if k == key])
        running = peak = 0
        for _, step in edges:
            running += step
            peak = max(peak, running)
        peaks[key] = peak
    return peaks


class Sampler(threading.Thread):
    """Reads each key's RUNNING jobs (unexpired leases) every few ms."""

    def __init__(self, db_url: str) -> None:
        super().__init__(daemon=True)
        self.db_url = db_url
        self.stop = threading.Event()
        self.peaks: dict[str, int] = {}
        self.samples = 0

    def run(self) -> None:
        with psycopg.connect(self.db_url, autocommit=True) as conn:
            while not self.stop.is_set():
                for key, n in conn.execute(
                        "SELECT key, count(*) FROM ONLY awc.jobs WHERE state = 'RUNNING' "
                        "AND locked_until > now() AND key IS NOT NULL GROUP BY key"):
                    self.peaks[key] = max(self.peaks.get(key, 0), n)
                self.samples += 1
                self.stop.wait(0.005)


def run_limited_drain(conn: psycopg.Connection[Any], db_url: str, env: dict[str, str],
                      *limit: str, per_key_max: int) -> tuple[Sampler, dict[str, int]]:
    """Set the limit, enqueue 4 keys x 12 `timed` jobs and 50 others, drain
    them with three ticks at once; the sampler and each key's timed peak."""
    assert run_awc(env, "limits", "set", *limit, "--max-running",
                   str(per_key_max)).returncode == 0
    jobs = [{"kind": "timed", "key": f"tenant-{n % 4}", "payload": {"secs": 0.15}}
            for n in range(48)] + [{"kind": "noop"} for _ in range(50)]
    enqueue_many(conn, jobs)
    sampler = Sampler(db_url)
    sampler.start()
    try:
        drain_with_ticks({**env, "AWC_WORKER_CONCURRENCY": "8"}, 3)
    finally:
        sampler.stop.set()
        sampler.join(timeout=10)
    states = dict(conn.execute("SELECT state, count(*) FROM awc.jobs GROUP BY state").fetchall())
    assert states == {"COMPLETED": 98}
    return sampler, most_at_once_by_key(conn)


def test_key_star_max_running_holds_for_each_key_across_concurrent_ticks(
    conn: psycopg.Connection[Any], db_url: str, awc_env: dict[str, str],
) -> None:
    sampler, peaks = run_limited_drain(conn, db_url, awc_env, "key:*", per_key_max=2)
    assert sampler.samples > 20
    assert max(sampler.peaks.values()) <= 2, sampler.peaks
    assert set(peaks) == {f"tenant-{n}" for n in range(4)}
    assert max(peaks.values()) == 2, peaks  # reached, never passed


def test_per_key_within_a_kind_holds_across_concurrent_ticks(
    conn: psycopg.Connection[Any], db_url: str, awc_env: dict[str, str],
) -> None:
    sampler, peaks = run_limited_drain(conn, db_url, awc_env, "kind:timed", "--per-key",
                                       per_key_max=1)
    assert sampler.samples > 20
    assert max(sampler.peaks.values()) <= 1, sampler.peaks
    assert set(peaks) == {f"tenant-{n}" for n in range(4)}
    assert max(peaks.values()) == 1, peaks  # reached, never passed


def test_one_keys_limit_leaves_the_other_keys_free(
    conn: psycopg.Connection[Any], awc_env: dict[str, str],
) -> None:
    assert run_awc(awc_env, "limits", "set", "key:tenant-0", "--max-running",
                   "1").returncode == 0
    enqueue_many(conn, [{"kind": "timed", "key": f"tenant-{n % 2}", "payload": {"secs": 0.1}}
                        for n in range(16)])
    drain_with_ticks({**awc_env, "AWC_WORKER_CONCURRENCY": "8"}, 2)
    peaks = most_at_once_by_key(conn)
    assert peaks["tenant-0"] == 1
    assert peaks["tenant-1"] > 1


def test_a_keys_own_limit_replaces_key_star_for_it(
    conn: psycopg.Connection[Any], awc_env: dict[str, str],
) -> None:
    for target, n in (("key:*", "1"), ("key:tenant-0", "3")):
        assert run_awc(awc_env, "limits", "set", target, "--max-running", n).returncode == 0
    enqueue_many(conn, [{"kind": "timed", "key": f"tenant-{n % 2}", "payload": {"secs": 0.1}}
                        for n in range(16)])
    drain_with_ticks({**awc_env, "AWC_WORKER_CONCURRENCY": "8"}, 2)
    assert most_at_once_by_key(conn) == {"tenant-0": 3, "tenant-1": 1}


def test_a_per_key_rate_holds_in_every_window_across_concurrent_ticks(
    conn: psycopg.Connection[Any], awc_env: dict[str, str],
) -> None:
    """key:* --rate 3 --per 1: no key is claimed more than 3 times in any
    second, whichever of two ticks claims; keys without jobs limit nothing."""
    assert run_awc(awc_env, "limits", "set", "key:*", "--rate", "3",
                   "--per", "1").returncode == 0
    enqueue_many(conn, [{"kind": "noop", "key": f"tenant-{n % 3}"} for n in range(18)]
                 + [{"kind": "noop"}] * 20)
    drain_with_ticks({**awc_env, "AWC_WORKER_CONCURRENCY": "8"}, 2)
    rows = conn.execute("SELECT key, started_at FROM awc.jobs WHERE key IS NOT NULL "
                        "AND state = 'COMPLETED' ORDER BY key, started_at").fetchall()
    assert len(rows) == 18
    for key in {r[0] for r in rows}:
        starts = [r[1] for r in rows if r[0] == key]
        assert len(starts) == 6
        # Any four claims of one key span at least the window.
        spans = [(starts[i + 3] - starts[i]).total_seconds() for i in range(len(starts) - 3)]
        assert min(spans) >= 1.0, (key, spans)


def test_the_limits_cli_round_trips_per_key_limits(
    conn: psycopg.Connection[Any], awc_env: dict[str, str],
) -> None:
    for args in (["key:acme", "--max-running", "3"], ["key:*", "--max-running", "2"],
                 ["kind:email", "--per-key", "--max-running", "1"]):
        done = run_awc(awc_env, "limits", "set", *args)
        assert done.returncode == 0, done.stderr
    conn.execute("INSERT INTO awc.jobs (kind, key, state, attempts, claim_token, locked_until) "
                 "SELECT 'email', k, 'RUNNING', 1, gen_random_uuid(), "
                 "now() + interval '1 minute' FROM unnest(ARRAY['acme', 'acme', 'beta']) AS k")
    listed = json.loads(run_awc(awc_env, "limits", "list", "--json").stdout)
    by = {(r["scope"], r["name"]): r for r in listed}
    assert set(by) == {("key", "acme"), ("key", "*"), ("kind_key", "email")}
    assert by[("key", "acme")]["running"] == 2
    # key:acme replaces key:* for acme: key:* counts the other keys.
    assert by[("key", "*")]["busiest"] == [{"key": "beta", "running": 1}]
    assert by[("key", "*")]["running"] == 1
    assert by[("kind_key", "email")]["max_running"] == 1
    text = run_awc(awc_env, "limits", "list").stdout
    assert "acme=2 beta=1" in text  # kind:email --per-key: every key of the kind
    for args in (["key:acme"], ["key:*"], ["kind:email", "--per-key"]):
        assert run_awc(awc_env, "limits", "clear", *args).returncode == 0
    assert json.loads(run_awc(awc_env, "limits", "list", "--json").stdout) == []


def test_bad_per_key_limits_are_one_usage_line(awc_env: dict[str, str]) -> None:
    for args, word in ((["key:", "--max-running", "1"], "target"),
                       (["key:" + "k" * 201, "--max-running", "1"], "target"),
                       (["queue:q", "--per-key", "--max-running", "1"], "--per-key"),
                       (["key:a", "--per-key", "--max-running", "1"], "--per-key"),
                       (["key:*", "--rate", "5"], "rate")):
        done = run_awc(awc_env, "limits", "set", *args)
        assert done.returncode == 2, (args, done.stderr)
        # A usage error (as every bad limit, SPEC §18): names the field, no traceback.
        assert "Traceback" not in done.stderr and word in done.stderr.lower(), done.stderr


def test_a_tick_held_back_by_a_per_key_limit_waits_for_room_rather_than_end(
    conn: psycopg.Connection[Any], awc_env: dict[str, str],
) -> None:
    """Key `solo` may run 1 job and another worker's job of it holds the
    room for a second more: the tick's first claim takes nothing because of
    the limit, not because the queue drained, so it claims again and runs
    the key's jobs once the room is back."""
    assert run_awc(awc_env, "limits", "set", "key:*", "--max-running", "1").returncode == 0
    conn.execute("INSERT INTO awc.jobs (kind, key, state, attempts, claim_token, locked_until) "
                 "VALUES ('noop', 'solo', 'RUNNING', 1, gen_random_uuid(), "
                 "now() + interval '1 second')")
    enqueue_many(conn, [{"kind": "timed", "key": "solo", "payload": {"secs": 0.05}}] * 6)
    proc = spawn({**awc_env, "AWC_WORKER_CONCURRENCY": "4"}, "tick", "--json")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out)["completed"] >= 6
    assert conn.execute("SELECT count(*) FROM awc.jobs WHERE kind = 'timed' "
                        "AND state = 'COMPLETED'").fetchone() == (6,)
    assert most_at_once_by_key(conn) == {"solo": 1}


def test_per_key_limits_hold_in_the_lane_claim_under_a_binding_kind_limit(
    conn: psycopg.Connection[Any], db_url: str, awc_env: dict[str, str],
) -> None:
    """A kind limit that binds sends the claim to the lane claim (decision
    0018); the per-key limit is counted there too."""
    assert run_awc(awc_env, "limits", "set", "kind:timed", "--max-running", "3").returncode == 0
    sampler, peaks = run_limited_drain(conn, db_url, awc_env, "key:*", per_key_max=1)
    assert max(sampler.peaks.values()) <= 1, sampler.peaks
    assert max(peaks.values()) == 1, peaks
    rows = conn.execute("SELECT started, ended FROM test_intervals").fetchall()
    edges = sorted([(s, 1) for s, _ in rows] + [(e, -1) for _, e in rows])
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    assert peak <= 3



def test_a_key_with_array_syntax_in_it_is_limited_like_any_other(
    conn: psycopg.Connection[Any],
) -> None:
    """The held limits travel as a text[] setting: a key with quotes,
    braces, commas and backslashes must come back as itself."""
    import time

    from tick.engine.cursor import Cursor
    from tick.limits import Limit, set_limit
    from tick.queue import ClaimRequest, Writes, round_trip

    odd = 'a"b{c},d\\e f:g'
    set_limit(conn, Limit("key", odd, max_running=2))
    enqueue_many(conn, [{"kind": "noop", "key": odd}] * 5 + [{"kind": "noop", "key": "x"}] * 5)
    cursor = Cursor()
    request = ClaimRequest(slots=[f"s{i}" for i in range(10)], lease_secs=60.0, cap_secs=60.0,
                           leases_json="{}", kinds=None, queues=None,
                           cursor=cursor.params(time.monotonic()), fair=True)  # the fair claim
    done = round_trip(conn, Writes(), request)
    keys = [r[0] for r in conn.execute(
        "SELECT key FROM awc.jobs WHERE id = ANY (%s)", ([row.id for row in done.claimed],))]
    assert sorted(keys, key=str) == sorted([odd] * 2 + ["x"] * 5, key=str)
    assert done.held_back


def test_the_lane_claim_also_says_a_per_key_limit_held_jobs_back(
    conn: psycopg.Connection[Any], awc_env: dict[str, str],
) -> None:
    """As above while another kind is paused (a limit that binds: the lane
    claim claims): the tick waits for the key's room rather than end
    drained, though no kind or queue limit of its jobs held them."""
    for args in (["kind:other", "--max-running", "0"], ["key:*", "--max-running", "1"]):
        assert run_awc(awc_env, "limits", "set", *args).returncode == 0
    enqueue_many(conn, [{"kind": "other"}])
    conn.execute("INSERT INTO awc.jobs (kind, key, state, attempts, claim_token, locked_until) "
                 "VALUES ('noop', 'solo', 'RUNNING', 1, gen_random_uuid(), "
                 "now() + interval '1 second')")
    enqueue_many(conn, [{"kind": "timed", "key": "solo", "payload": {"secs": 0.05}}] * 4)
    proc = spawn({**awc_env, "AWC_WORKER_CONCURRENCY": "4"}, "tick", "--json")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out)["completed"] >= 4
    assert most_at_once_by_key(conn) == {"solo": 1}


def test_a_pause_over_every_key_or_a_kind_s_keys_leaves_what_it_does_not_cover(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    # SPEC §23: key:* at max_running 0 pauses the keys without a limit of
    # their own, kind:K --per-key at 0 the keyed jobs of K. With more such
    # keys than slots sorting first, the walk spent every slot on them and
    # the tick ended drained with nothing claimed: jobs without a key, a key
    # with its own limit and keyed jobs of another kind waited for ever.
    env = {**awc_env, "AWC_WORKER_CONCURRENCY": "4"}
    for target, extra in (("key:*", []), ("kind:sleep", ["--per-key"])):
        done = run_awc(awc_env, "limits", "set", target, *extra, "--max-running", "0")
        assert done.returncode == 0, done.stderr
    assert run_awc(awc_env, "limits", "set", "key:zz-own", "--max-running", "5").returncode == 0
    paused_by_star = enqueue_many(conn, [{"kind": "noop", "key": f"a-{n:02d}"} for n in range(20)])
    paused_kind = enqueue_many(conn, [{"kind": "sleep", "key": "zz-own",
                                       "payload": {"secs": 0}}] * 3)
    free = enqueue_many(conn, [{"kind": "noop"}] * 5 + [{"kind": "noop", "key": "zz-own"}] * 5)
    done = run_awc(env, "tick", "--json")
    assert done.returncode == 0, done.stderr
    states = dict(conn.execute("SELECT id, state FROM awc.jobs").fetchall())
    assert [states[i] for i in free] == ["COMPLETED"] * 10
    assert {states[i] for i in paused_by_star + paused_kind} == {"PENDING"}
    assert json.loads(done.stdout)["stop_reason"] == "drained"


def test_a_rate_s_claims_out_of_their_window_are_pruned(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    # A claim forgets the old claims of the keys it counts; a key never
    # claimed again kept its rows for ever (2,000 more per 2,000 new keys).
    assert run_awc(awc_env, "limits", "set", "key:*", "--rate", "5", "--per", "60").returncode == 0
    assert run_awc(awc_env, "limits", "set", "kind:k", "--max-running", "3").returncode == 0
    conn.execute("INSERT INTO awc.limit_claims (scope, name, key, at) "
                 "SELECT 'key', '*', 'tenant-' || n, now() - interval '2 minutes' "
                 "FROM generate_series(1, 3000) AS n")
    conn.execute("INSERT INTO awc.limit_claims (scope, name, key, at) VALUES "
                 "('key', '*', 'fresh', now()), ('kind', 'k', NULL, now() - interval '1 day')")
    done = run_awc(awc_env, "prune")
    assert done.returncode == 0, done.stderr
    left = conn.execute("SELECT scope, key FROM awc.limit_claims").fetchall()
    assert left == [("key", "fresh")]  # in its window; kind:k has no rate: nothing counts


def test_the_busiest_keys_list_quotes_a_key_that_could_pass_for_others(
    conn: psycopg.Connection[Any], awc_env: dict[str, str],
) -> None:
    # Joined by spaces as key=running, "a=9 b" read as two entries and
    # "x\ny" as "x y"; such keys are quoted now, and still escaped.
    assert run_awc(awc_env, "limits", "set", "key:*", "--max-running", "5").returncode == 0
    conn.execute("INSERT INTO awc.jobs (kind, key, state, attempts, claim_token, locked_until) "
                 "SELECT 'k', k, 'RUNNING', 1, gen_random_uuid(), now() + interval '1 minute' "
                 "FROM unnest(ARRAY['a=9 b', E'x\\ny', E'\\u202ez']) AS k")
    text = run_awc(awc_env, "limits", "list").stdout
    assert '"a=9 b"=1' in text and '"x\\ny"=1' in text and " \\u202ez=1" in text, text


def test_a_pause_over_every_key_leaves_the_rest_of_a_lane_under_a_kind_limit(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    # With a kind limit that may bind, the lane claim reads each lane's
    # first jobs up to its cap: paused keyed jobs took every place, and the
    # jobs without a key behind them in the lane were never claimed.
    assert run_awc(awc_env, "limits", "set", "key:*", "--max-running", "0").returncode == 0
    assert run_awc(awc_env, "limits", "set", "kind:noop", "--max-running", "3").returncode == 0
    paused = enqueue_many(conn, [{"kind": "noop", "key": f"t-{n}"} for n in range(10)])
    free = enqueue_many(conn, [{"kind": "noop"}] * 5)
    done = run_awc({**awc_env, "AWC_WORKER_CONCURRENCY": "4"}, "tick", "--json")
    assert done.returncode == 0, done.stderr
    states = dict(conn.execute("SELECT id, state FROM awc.jobs").fetchall())
    assert [states[i] for i in free] == ["COMPLETED"] * 5
    assert {states[i] for i in paused} == {"PENDING"}
    # The paused jobs are not held back by the kind's limit: the tick ends,
    # it does not poll them until its deadline.
    assert json.loads(done.stdout)["stop_reason"] == "drained"
