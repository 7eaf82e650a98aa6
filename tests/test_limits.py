"""SPEC §18 over real processes: global limits hold across several
concurrent `awc tick` processes, counted from the handlers' own run times
and the claims' stamps in the database, and never hold back other work."""

from __future__ import annotations

import json
import signal
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from tests.support import run_awc, spawn, wait_for
from tick.producer import enqueue_many


def ticks_at_once(env: dict[str, str], n: int, *args: str) -> list[dict[str, Any]]:
    """Run `n` `awc tick` processes at the same time; their reports."""
    procs = [spawn(env, "tick", "--json", *args) for _ in range(n)]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, err
        reports.append(json.loads(out))
    return reports


def most_at_once(conn: psycopg.Connection[Any]) -> int:
    """The most `timed` handlers that were running at one instant."""
    rows = conn.execute("SELECT started, ended FROM test_intervals").fetchall()
    edges = sorted([(s, 1) for s, _ in rows] + [(e, -1) for _, e in rows])  # an end first
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


def state_counts(conn: psycopg.Connection[Any], kind: str) -> dict[str, int]:
    return dict(conn.execute("SELECT state, count(*) FROM awc.jobs WHERE kind = %s "
                             "GROUP BY state", (kind,)).fetchall())


def test_max_running_holds_across_concurrent_ticks_and_others_flow(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    assert run_awc(awc_env, "limits", "set", "kind:timed", "--max-running", "3").returncode == 0
    enqueue_many(conn, [{"kind": "timed", "payload": {"secs": 0.3}}] * 24
                 + [{"kind": "noop"}] * 400)
    env = {**awc_env, "AWC_WORKER_CONCURRENCY": "16"}
    reports = ticks_at_once(env, 5)  # held back is not drained: they go on until done
    assert state_counts(conn, "timed") == {"COMPLETED": 24}
    assert state_counts(conn, "noop") == {"COMPLETED": 400}
    assert sum(r["completed"] for r in reports) == 424
    # Every other job went through while the limited kind was saturated, not
    # after it: the last of them ended before the last limited one started.
    noop_end, timed_start = conn.execute(
        "SELECT (SELECT max(finished_at) FROM awc.jobs WHERE kind = 'noop'), "
        "(SELECT max(started) FROM test_intervals)").fetchone()
    assert noop_end < timed_start
    assert most_at_once(conn) == 3  # reached, never passed


@pytest.mark.parametrize("lane", [["--queue", "q1"], ["--queue", "q1", "--queue", "q2"],
                                  ["--kind", "timed"]])
def test_every_claim_lane_obeys_the_limits(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], lane: list[str]
) -> None:
    assert run_awc(awc_env, "limits", "set", "kind:timed", "--max-running", "2").returncode == 0
    enqueue_many(conn, [{"kind": "timed", "queue": "q1", "payload": {"secs": 0.2}}] * 8)
    ticks_at_once({**awc_env, "AWC_WORKER_CONCURRENCY": "8"}, 4, *lane)
    assert state_counts(conn, "timed") == {"COMPLETED": 8}
    assert most_at_once(conn) == 2


def test_a_rate_holds_in_every_window_across_concurrent_ticks(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    assert run_awc(awc_env, "limits", "set", "kind:timed", "--rate", "4", "--per",
                   "1").returncode == 0
    enqueue_many(conn, [{"kind": "timed", "payload": {"secs": 0.01}}] * 20)
    env = {**awc_env, "AWC_WORKER_CONCURRENCY": "8"}
    for _ in range(40):
        if state_counts(conn, "timed") == {"COMPLETED": 20}:
            break
        ticks_at_once(env, 4)
    assert state_counts(conn, "timed") == {"COMPLETED": 20}
    stamps = [row[0] for row in conn.execute(
        "SELECT started_at FROM awc.jobs WHERE kind = 'timed' ORDER BY started_at")]
    for i, start in enumerate(stamps):  # every window of 1 s that starts at a claim
        assert sum(1 for s in stamps[i:] if s < start + timedelta(seconds=1)) <= 4, stamps
    listed = json.loads(run_awc(awc_env, "limits", "list", "--json").stdout)
    assert [(x["scope"], x["name"], x["rate"], x["per_secs"]) for x in listed] \
        == [("kind", "timed", 4, 1)]
    assert set(listed[0]) == {"scope", "name", "max_running", "rate", "per_secs", "paused",
                              "running",
                              "window_claims", "held_back",
                              "busiest"}  # SPEC §23: a per-key limit's busiest keys


def test_expired_leases_of_a_killed_holder_stop_counting(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    assert run_awc(awc_env, "limits", "set", "kind:timed", "--max-running", "2").returncode == 0
    enqueue_many(conn, [{"kind": "timed", "payload": {"secs": 0.05, "first_secs": 60}}] * 2)
    killed = spawn(awc_env, "tick", "--max-secs", "50")
    try:
        wait_for(lambda: conn.execute("SELECT count(*) FROM test_intervals").fetchone() == (2,),
                 timeout=30, what="both limited jobs to start")
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.communicate(timeout=30)
    listed = json.loads(run_awc(awc_env, "limits", "list", "--json").stdout)
    assert listed[0]["running"] == 2
    conn.execute("UPDATE awc.jobs SET locked_until = now() - interval '1 second'")  # leases end
    assert json.loads(run_awc(awc_env, "limits", "list", "--json").stdout)[0]["running"] == 0
    report = json.loads(run_awc(awc_env, "tick", "--json").stdout)
    assert (report["rescued"], report["completed"]) == (2, 2)
    assert state_counts(conn, "timed") == {"COMPLETED": 2}


def test_max_running_zero_pauses_a_kind_and_a_queue_limit_binds_with_it(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    assert run_awc(awc_env, "limits", "set", "kind:timed", "--max-running", "0").returncode == 0
    assert run_awc(awc_env, "limits", "set", "queue:slow", "--max-running", "1").returncode == 0
    enqueue_many(conn, [{"kind": "timed", "payload": {"secs": 0}}] * 3
                 + [{"kind": "noop", "queue": "slow"}] * 3 + [{"kind": "noop"}] * 3)
    report = json.loads(run_awc(awc_env, "tick", "--json").stdout)
    assert report["completed"] == 6  # the unlimited three, and the queue's one at a time
    assert state_counts(conn, "timed") == {"PENDING": 3}
    held = {x["name"]: x["held_back"] for x in
            json.loads(run_awc(awc_env, "limits", "list", "--json").stdout)}
    assert held == {"timed": 3, "slow": 0}
    assert run_awc(awc_env, "limits", "clear", "kind:timed").returncode == 0
    assert json.loads(run_awc(awc_env, "tick", "--json").stdout)["completed"] == 3


@pytest.mark.parametrize(("args", "problem"), [
    (["kind:x"], "--max-running or --rate"),
    (["kind:x", "--rate", "5"], "--rate and --per"),
    (["kind:x", "--per", "5"], "--rate and --per"),
    (["kind:x", "--max-running", "-1"], "--max-running"),
    (["kind:x", "--rate", "0", "--per", "1"], "--rate"),
    (["kind:x", "--rate", "1", "--per", "0"], "--per"),
    (["tenant:x", "--max-running", "1"], "TARGET"),
    (["kind:", "--max-running", "1"], "TARGET"),
    (["kind:" + "x" * 201, "--max-running", "1"], "TARGET"),
    (["kind:a\x01b\udc80", "--max-running", "1"], "TARGET"),
    (["kind:x", "--max-running", "99999999999"], "--max-running"),
])
def test_a_bad_limit_is_a_usage_error_and_writes_nothing(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], args: list[str], problem: str
) -> None:
    done = run_awc(awc_env, "limits", "set", *args)
    assert done.returncode == 2 and problem in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert conn.execute("SELECT count(*) FROM awc.limits").fetchone() == (0,)
    missing = run_awc(awc_env, "limits", "clear", "kind:nothing")
    assert missing.returncode == 1 and missing.stderr.startswith("awc: no limit on kind")


def test_the_held_back_gauge_follows_each_limit(conn: psycopg.Connection[Any]) -> None:
    """SPEC §18, §9: `awc_limit_held_back_jobs{scope,name}`, sampled with the
    queue gauges; a limit cleared since reads 0."""
    from tick.limits import Limit, clear_limit, set_limit
    from tick.metrics import Metrics

    set_limit(conn, Limit("kind", "timed", max_running=0))
    set_limit(conn, Limit("queue", "spare", max_running=5))
    enqueue_many(conn, [{"kind": "timed"}] * 3 + [{"kind": "noop", "queue": "spare"}])
    metrics = Metrics()
    metrics.sample_queue(conn)
    text = metrics.exposition().decode()
    assert 'awc_limit_held_back_jobs{name="timed",scope="kind"} 3.0' in text
    assert 'awc_limit_held_back_jobs{name="spare",scope="queue"} 0.0' in text  # has room
    clear_limit(conn, "kind", "timed")
    metrics.sample_queue(conn)
    assert 'awc_limit_held_back_jobs{name="timed",scope="kind"} 0.0' \
        in metrics.exposition().decode()


def claim_kinds(conn: psycopg.Connection[Any], slots: int, **narrow: Any) -> list[str]:
    """The kinds one claim of `slots` slots takes, in the order it gives them slots."""
    from tick.queue import ClaimRequest, Writes, round_trip

    request = ClaimRequest(slots=[f"w-{n}" for n in range(slots)], lease_secs=60, cap_secs=60,
                           leases_json="{}", kinds=narrow.get("kinds"),
                           queues=narrow.get("queues"))
    rows = round_trip(conn, Writes(), request).claimed
    return [row.kind for row in sorted(rows, key=lambda row: int(row.slot.split("-")[1]))]


NEVER_BINDING = [
    pytest.param([("kind", "low", 1000, None)], id="kind-max-running"),
    pytest.param([("kind", "low", None, 1000)], id="kind-rate"),
    pytest.param([("queue", "lq", 1000, None)], id="queue-max-running"),
    pytest.param([("kind", "low", 1000, 1000), ("queue", "lq", 1000, None)], id="kind-and-queue"),
    pytest.param([("kind", "high", 1000, None)], id="the-higher-kind"),
    pytest.param([("kind", "elsewhere", 1000, None)], id="another-kind"),
]


@pytest.mark.parametrize("limits", NEVER_BINDING)
@pytest.mark.parametrize("narrow", [{}, {"queues": ["lq", "hq"]}, {"queues": ["lq"]},
                                    {"kinds": ["low", "high"]}],
                         ids=["all", "queues", "queue", "kinds"])
def test_a_limit_that_does_not_bind_never_lets_its_jobs_jump_ahead_of_higher_priority(
    conn: psycopg.Connection[Any], limits: list[tuple[str, str, int | None, int | None]],
    narrow: dict[str, list[str]],
) -> None:
    """SPEC §4.1 (higher priority runs first) across limited and unlimited
    work, SPEC §18 (a limit only holds jobs back): whichever kind or queue a
    limit names, a claim takes jobs in priority order, then oldest first."""
    from tick.limits import Limit, set_limit

    for scope, name, most, rate in limits:
        set_limit(conn, Limit(scope, name, max_running=most, rate=rate,
                              per_secs=None if rate is None else 1))
    one_lane = narrow.get("queues") == ["lq"]
    enqueue_many(conn, [{"kind": "low", "queue": "lq", "priority": 0}] * 3
                 + [{"kind": "high", "queue": "lq" if one_lane else "hq", "priority": 5}] * 2
                 + [{"kind": "low", "queue": "lq", "priority": 1}])
    assert claim_kinds(conn, 1, **narrow) == ["high"]
    assert claim_kinds(conn, 2, **narrow) == ["high", "low"]
    # The low kind's priority-1 job first, then its older priority-0 ones.
    assert conn.execute("SELECT priority FROM awc.jobs WHERE state = 'RUNNING' "
                        "AND kind = 'low'").fetchall() == [(1,)]
    assert claim_kinds(conn, 8, **narrow) == ["low"] * 3


def test_a_binding_limit_holds_back_only_its_own_jobs_in_priority_order(
    conn: psycopg.Connection[Any]
) -> None:
    """SPEC §18: a limit with room for 2 takes its 2 highest-priority jobs, each
    in its place among the others; the rest of its jobs wait, and the rest of
    the claim keeps priority order."""
    from tick.limits import Limit, set_limit

    set_limit(conn, Limit("kind", "capped", max_running=2))
    enqueue_many(conn, [{"kind": "capped", "priority": 9}, {"kind": "noop", "priority": 5}]
                 + [{"kind": "capped", "priority": 1}] * 3 + [{"kind": "noop", "priority": 0}])
    assert claim_kinds(conn, 5) == ["capped", "noop", "capped", "noop"]
    assert claim_kinds(conn, 5) == []
    assert state_counts(conn, "capped") == {"RUNNING": 2, "PENDING": 2}
