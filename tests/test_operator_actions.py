"""SPEC §22 over real `awc` processes: the bulk operator commands (`awc
retry`, `awc cancel`, `awc jobs discard` with ids or a filter, a preview
without --yes, each action audited) and `awc pause` / `awc resume`."""

from __future__ import annotations

import json
from typing import Any

import psycopg

from tests.support import run_awc
from tick.producer import enqueue, enqueue_many


def states(conn: psycopg.Connection[Any], ids: list[int]) -> list[str | None]:
    found = dict(conn.execute("SELECT id, state FROM awc.jobs WHERE id = ANY(%s)",
                              (ids,)).fetchall())
    return [found.get(i) for i in ids]


def set_state(conn: psycopg.Connection[Any], ids: list[int], state: str,
              finished_ago: str = "0 s") -> None:
    conn.execute("UPDATE awc.jobs SET state = %s, finished_at = now() - %s::interval "
                 "WHERE id = ANY(%s)", (state, finished_ago, ids))


def audits(conn: psycopg.Connection[Any], event: str) -> list[tuple[str, Any]]:
    return [(s, d) for s, d in conn.execute(
        "SELECT subject, detail FROM awc.audit_events WHERE event = %s ORDER BY id",
        (event,)).fetchall()]


def test_a_filter_previews_the_count_and_changes_nothing_without_yes(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    dead = enqueue_many(conn, [{"kind": "a"}] * 3 + [{"kind": "b"}] * 2)
    set_state(conn, dead, "FAILED")
    preview = run_awc(awc_env, "retry", "--state", "failed", "--kind", "a")
    assert preview.returncode == 0, preview.stderr
    assert "would touch 3 jobs" in preview.stdout and "--yes" in preview.stdout
    assert states(conn, dead) == ["FAILED"] * 5
    assert audits(conn, "cli.retry") == []
    done = run_awc(awc_env, "retry", "--state", "failed", "--kind", "a", "--yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "3 jobs retried (PENDING)"
    assert states(conn, dead) == ["PENDING"] * 3 + ["FAILED"] * 2
    assert audits(conn, "cli.retry") == [
        ("jobs", {"filter": {"state": "FAILED", "kind": "a"}, "count": 3})]


def test_several_ids_preview_then_cancel_only_those_that_can_be(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    ids = enqueue_many(conn, [{"kind": "noop"}] * 3)
    set_state(conn, ids[2:], "COMPLETED")
    args = [str(i) for i in ids]
    preview = run_awc(awc_env, "cancel", *args)
    assert "would touch 2 jobs" in preview.stdout, preview.stderr
    assert states(conn, ids) == ["PENDING", "PENDING", "COMPLETED"]
    done = run_awc(awc_env, "cancel", *args, "--yes")
    assert done.stdout.strip() == "2 jobs cancelled", done.stderr
    assert states(conn, ids) == ["CANCELLED", "CANCELLED", "COMPLETED"]
    assert audits(conn, "cli.cancel") == [("jobs", {"ids": ids, "count": 2})]


def test_one_id_acts_at_once_and_is_audited(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "noop")
    set_state(conn, [job_id], "FAILED")
    done = run_awc(awc_env, "jobs", "discard", str(job_id))
    assert (done.returncode, done.stdout.strip()) == (0, f"job {job_id} discarded"), done.stderr
    assert states(conn, [job_id]) == [None]
    assert audits(conn, "cli.discard") == [(f"job:{job_id}", {"ids": [job_id], "count": 1})]
    live = enqueue(conn, "noop")
    refused = run_awc(awc_env, "jobs", "discard", str(live))
    assert refused.returncode == 1
    assert refused.stderr.strip() == (f"awc: job {live} is PENDING; only FAILED, CANCELLED "
                                       "or COMPLETED jobs can be discarded")
    assert states(conn, [live]) == ["PENDING"]
    retried = enqueue(conn, "noop")
    set_state(conn, [retried], "CANCELLED")
    assert run_awc(awc_env, "retry", str(retried)).stdout.strip() == f"job {retried} is PENDING"
    assert audits(conn, "cli.retry") == [(f"job:{retried}", {"ids": [retried], "count": 1})]


def test_discard_deletes_only_final_jobs_older_than_asked(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    old = enqueue_many(conn, [{"kind": "k"}] * 3)
    for job_id, state in zip(old, ("FAILED", "CANCELLED", "COMPLETED"), strict=True):
        set_state(conn, [job_id], state, "8 days")
    recent = enqueue_many(conn, [{"kind": "k"}] * 2)
    set_state(conn, recent, "FAILED", "1 day")
    live = enqueue_many(conn, [{"kind": "k"}] * 2)
    conn.execute("UPDATE awc.jobs SET created_at = now() - interval '30 days' "
                 "WHERE id = ANY(%s)", (live,))
    preview = run_awc(awc_env, "jobs", "discard", "--older-than", "7d")
    assert "would touch 3 jobs" in preview.stdout, preview.stderr
    done = run_awc(awc_env, "jobs", "discard", "--older-than", "7d", "--yes")
    assert done.stdout.strip() == "3 jobs discarded", done.stderr
    assert states(conn, old + recent + live) == [None] * 3 + ["FAILED"] * 2 + ["PENDING"] * 2
    assert audits(conn, "cli.discard") == [
        ("jobs", {"filter": {"older_than_secs": 7 * 86400.0}, "count": 3})]
    # Not final: compared with created_at (cancel's --older-than).
    fresh = enqueue(conn, "k")
    cancelled = run_awc(awc_env, "cancel", "--older-than", "90m", "--yes")
    assert cancelled.stdout.strip() == "2 jobs cancelled", cancelled.stderr
    assert states(conn, [*live, fresh]) == ["CANCELLED", "CANCELLED", "PENDING"]


def test_discard_of_pending_or_running_jobs_is_a_usage_error_that_changes_nothing(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    live = enqueue_many(conn, [{"kind": "k"}] * 2)
    for state in ("PENDING", "running", "Running"):
        refused = run_awc(awc_env, "jobs", "discard", "--state", state, "--yes")
        assert refused.returncode == 2, refused.stderr
        assert "discard applies to FAILED or CANCELLED or COMPLETED jobs" in refused.stderr
        assert "Traceback" not in refused.stderr
    assert states(conn, live) == ["PENDING", "PENDING"]
    assert audits(conn, "cli.discard") == []


def test_bad_selections_are_usage_errors(awc_env: dict[str, str]) -> None:
    for args, says in [
        (["retry"], "name the jobs"),
        (["cancel", "5", "--kind", "k"], "not both"),
        (["jobs", "discard", "--older-than", "7 days"], "--older-than"),
        (["jobs", "discard", "--older-than", "0d"], "--older-than"),
        (["retry", "--state", "PENDING"], "retry applies to FAILED or CANCELLED"),
        (["cancel", "--state", "nope"], "--state"),
    ]:
        refused = run_awc(awc_env, *args)
        assert refused.returncode == 2, (args, refused.stderr)
        assert says in refused.stderr, (args, refused.stderr)
        assert "Traceback" not in refused.stderr


def limit_row(conn: psycopg.Connection[Any], target: str) -> tuple[Any, ...] | None:
    scope, _, name = target.partition(":")
    return conn.execute("SELECT max_running, rate, per_secs FROM awc.limits "
                        "WHERE scope = %s AND name = %s", (scope, name)).fetchone()


def test_pause_keeps_the_rate_and_resume_restores_the_limit_it_had(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    assert run_awc(awc_env, "limits", "set", "kind:a", "--max-running", "3", "--rate", "5",
                   "--per", "60").returncode == 0
    assert run_awc(awc_env, "pause", "kind:a").stdout.strip() == "kind 'a' paused"
    assert limit_row(conn, "kind:a") == (0, 5, 60)
    again = run_awc(awc_env, "pause", "kind:a")  # the limit it had is not forgotten
    assert again.stdout.strip() == "kind 'a' was paused already"
    listed = json.loads(run_awc(awc_env, "limits", "list", "--json").stdout)
    assert [(x["name"], x["max_running"], x["paused"]) for x in listed] == [("a", 0, True)]
    assert run_awc(awc_env, "resume", "kind:a").stdout.strip() == "kind 'a' resumed"
    assert limit_row(conn, "kind:a") == (3, 5, 60)
    # A limit that existed only for the pause goes with the resume.
    assert run_awc(awc_env, "pause", "queue:q").returncode == 0
    assert limit_row(conn, "queue:q") == (0, None, None)
    assert run_awc(awc_env, "resume", "queue:q").returncode == 0
    assert limit_row(conn, "queue:q") is None
    assert [s for s, _ in audits(conn, "cli.pause")] == ["kind:a", "queue:q"]
    assert audits(conn, "cli.resume") == [("kind:a", {"limit": "restored"}),
                                          ("queue:q", {"limit": "removed"})]


def test_a_paused_kind_is_not_claimed_and_runs_after_resume(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    held, other = enqueue(conn, "noop"), enqueue(conn, "noop", queue="other")
    assert run_awc(awc_env, "pause", "queue:default").returncode == 0
    assert run_awc(awc_env, "tick").returncode == 0
    assert states(conn, [held, other]) == ["PENDING", "COMPLETED"]
    assert run_awc(awc_env, "resume", "queue:default").returncode == 0
    assert run_awc(awc_env, "tick").returncode == 0
    assert states(conn, [held]) == ["COMPLETED"]


def test_resume_of_what_pause_did_not_pause_says_so(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    assert run_awc(awc_env, "limits", "set", "kind:a", "--max-running", "0").returncode == 0
    refused = run_awc(awc_env, "resume", "kind:a")
    assert refused.returncode == 1
    assert refused.stderr.strip() == ("awc: kind 'a' is not paused by awc pause "
                                      "(see awc limits list)")
    assert limit_row(conn, "kind:a") == (0, None, None)
    bad = run_awc(awc_env, "pause", "tenant:x")
    assert bad.returncode == 2 and "kind:NAME or queue:NAME" in bad.stderr
    # `limits set` replaces a pause: a later resume does not undo it.
    assert run_awc(awc_env, "pause", "kind:b").returncode == 0
    assert run_awc(awc_env, "limits", "set", "kind:b", "--max-running", "2").returncode == 0
    assert run_awc(awc_env, "resume", "kind:b").returncode == 1
    assert limit_row(conn, "kind:b") == (2, None, None)


def test_dead_letters_are_pruned_only_past_their_own_retention(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    # SPEC §22: unset (as before), FAILED jobs are never pruned; set, the
    # prune pass deletes those finished longer ago than it, and only those.
    old, recent = enqueue_many(conn, [{"kind": "k"}] * 2)
    set_state(conn, [old], "FAILED", "3 days")
    set_state(conn, [recent], "FAILED", "1 hour")
    assert run_awc(awc_env, "prune").stdout.strip() == "pruned 0 jobs"
    assert states(conn, [old, recent]) == ["FAILED", "FAILED"]
    env = {**awc_env, "AWC_DEAD_LETTER_RETENTION_SECS": str(2 * 86400)}
    assert run_awc(env, "prune").stdout.strip() == "pruned 1 jobs"
    assert states(conn, [old, recent]) == [None, "FAILED"]
    # The hourly pass of `awc maintenance` does it too.
    set_state(conn, [recent], "FAILED", "3 days")
    conn.execute("UPDATE awc.maintenance SET last_run_at = '-infinity' WHERE step = 'prune'")
    assert run_awc(env, "maintenance", "tick").returncode == 0
    assert states(conn, [recent]) == [None]
    bad = run_awc({**awc_env, "AWC_DEAD_LETTER_RETENTION_SECS": "0"}, "prune")
    assert bad.returncode == 1 and "AWC_DEAD_LETTER_RETENTION_SECS" in bad.stderr


def test_a_filter_is_capped_per_run_and_says_so(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    # SPEC §22, as the console's bulk actions: one run counts and touches at
    # most 10,000 jobs, read through their state's index; the rest next run.
    conn.execute("INSERT INTO awc.jobs (kind, state, finished_at) "
                 "SELECT 'k', 'FAILED', now() FROM generate_series(1, 10005)")
    listed = run_awc(awc_env, "jobs", "list", "--state", "failed", "--limit", "3", "--json")
    assert len(listed.stdout.splitlines()) == 3, listed.stderr  # any case, as everywhere
    preview = run_awc(awc_env, "jobs", "discard", "--state", "Failed")
    assert preview.stdout.strip() == ("discard would touch 10,000 jobs (at most 10,000 a run: "
                                      "run it again for the rest); nothing was changed: "
                                      "add --yes to do it"), preview.stderr
    first = run_awc(awc_env, "jobs", "discard", "--state", "failed", "--yes")
    assert first.stdout.strip().startswith("10,000 jobs discarded"), first.stderr
    second = run_awc(awc_env, "jobs", "discard", "--state", "failed", "--yes")
    assert second.stdout.strip() == "5 jobs discarded"
    assert conn.execute("SELECT count(*) FROM awc.jobs").fetchone() == (0,)
    assert [d["count"] for _, d in audits(conn, "cli.discard")] == [10000, 5]


def test_a_job_dead_lettered_by_fail_is_found_by_age_and_pruned(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    # A Fail outcome (here: a kind no handler knows) finishes the job: it
    # had no finished_at, so --older-than and the dead letters' retention
    # never matched it (SPEC §22).
    failed = enqueue_many(conn, [{"kind": "nobody-handles-this"}] * 2)
    assert run_awc(awc_env, "tick").returncode == 0
    rows = conn.execute("SELECT state, finished_at IS NOT NULL FROM awc.jobs "
                        "WHERE id = ANY(%s)", (failed,)).fetchall()
    assert rows == [("FAILED", True)] * 2
    conn.execute("UPDATE awc.jobs SET finished_at = finished_at - interval '3 days' "
                 "WHERE id = %s", (failed[0],))
    preview = run_awc(awc_env, "retry", "--state", "FAILED", "--older-than", "2d")
    assert "would touch 1 job;" in preview.stdout, preview.stdout + preview.stderr
    env = {**awc_env, "AWC_DEAD_LETTER_RETENTION_SECS": str(2 * 86400)}
    assert run_awc(env, "prune").stdout.strip() == "pruned 1 jobs"
    assert states(conn, failed) == [None, "FAILED"]


def test_migration_0027_gives_the_fail_dead_letters_their_finished_at(
    conn: psycopg.Connection[Any],
) -> None:
    from tick.migrate import shipped

    old, done = enqueue_many(conn, [{"kind": "k"}] * 2)
    conn.execute("UPDATE awc.jobs SET state = 'FAILED', finished_at = NULL, "
                 "updated_at = now() - interval '5 days' WHERE id = %s", (old,))
    set_state(conn, [done], "FAILED", "1 day")
    conn.execute(next(m.sql for m in shipped() if m.version == 27).encode())
    rows = dict(conn.execute("SELECT id, now() - finished_at > interval '4 days' "
                             "FROM awc.jobs WHERE id = ANY(%s)", ([old, done],)).fetchall())
    assert rows == {old: True, done: False}


def test_a_job_whose_names_no_producer_writes_is_left_out_of_a_bulk_retry(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    """A FAILED row of plain SQL with a megabyte kind cannot enter the ready
    jobs' indexes: it failed the whole bulk retry (ProgramLimitExceeded,
    naming no job) and the other five stayed FAILED."""
    for kind in ["noop"] * 5 + ["k" * 1_000_000]:
        conn.execute("INSERT INTO awc.jobs (kind, state, finished_at) "
                     "VALUES (%s, 'FAILED', now())", (kind,))
    done = run_awc(awc_env, "retry", "--state", "failed", "--yes")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("5 jobs retried")
    rows = conn.execute("SELECT state, count(*) FROM awc.jobs GROUP BY 1 ORDER BY 1").fetchall()
    assert rows == [("FAILED", 1), ("PENDING", 5)]
    odd = conn.execute("SELECT id FROM awc.jobs WHERE state = 'FAILED'").fetchone()
    assert odd is not None
    one = run_awc(awc_env, "retry", str(odd[0]))
    assert one.returncode == 1
    assert "longer than a producer writes" in one.stderr
