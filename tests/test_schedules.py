"""SPEC §15: durable schedules, fired by every tick: the ledger, missed and
overlap policies, pause and resume, edits, trigger, the commands and sync,
and exactly one ledger row per fire under concurrent, killed ticks."""

from __future__ import annotations

import json
import random
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support import run_awc, spawn
from tick import tick
from tick.engine.registry import Registry, handler
from tick.producer import enqueue
from tick.schedules import Schedule, ScheduleNotFound, add, pause, resume, sync, trigger
from tick.schedules.times import fires


def registry() -> Registry:
    reg = Registry()
    handler("report", registry=reg)(lambda ctx, p: p)
    return reg


def backdate(conn: psycopg.Connection[Any], name: str, minutes: int) -> datetime:
    """Pretend the schedule has not fired for `minutes`: its next fire is that old."""
    row = conn.execute("UPDATE awc.schedules SET next_fire_at = date_trunc('minute', now()) - "
                       "make_interval(mins => %s) WHERE name = %s RETURNING next_fire_at",
                       (minutes, name)).fetchone()
    assert row is not None
    return row[0]


def ledger(conn: psycopg.Connection[Any], name: str) -> list[tuple[datetime, str, int | None]]:
    return conn.execute("SELECT fire_at, status, job_id FROM awc.schedule_fires "
                        "WHERE schedule = %s ORDER BY fire_at", (name,)).fetchall()


def every_minute(name: str = "minutely", **options: Any) -> Schedule:
    return Schedule(name, "* * * * *", "report", {"from": name}, **options)


def test_add_computes_the_next_fire_and_an_unchanged_add_changes_nothing(
    conn: psycopg.Connection[Any],
) -> None:
    assert add(conn, Schedule("nightly", "0 3 * * *", "report", timezone="Europe/Berlin")) \
        == "created"
    first = conn.execute("SELECT next_fire_at, updated_at FROM awc.schedules").fetchone()
    assert first[0].astimezone(UTC).hour in (1, 2)  # 03:00 in Berlin
    assert add(conn, Schedule("nightly", "0 3 * * *", "report", timezone="Europe/Berlin")) \
        == "unchanged"
    assert conn.execute("SELECT next_fire_at, updated_at FROM awc.schedules").fetchone() == first
    assert add(conn, Schedule("nightly", "0 4 * * *", "report", timezone="Europe/Berlin")) \
        == "updated"
    edited, now = conn.execute("SELECT next_fire_at, now() FROM awc.schedules").fetchone()
    # Recomputed from the new cron: the next 04:00 in Berlin (today's or
    # tomorrow's, whichever comes first: the test may run between the two).
    from zoneinfo import ZoneInfo

    wall = edited.astimezone(ZoneInfo("Europe/Berlin"))
    assert (wall.hour, wall.minute) == (4, 0) and now < edited <= now + timedelta(days=1)


@pytest.mark.parametrize("missed", ["latest", "all"])
def test_missed_fires_inside_the_catchup_window(conn: psycopg.Connection[Any], missed: str) -> None:
    add(conn, every_minute(missed=missed, catchup_secs=3600))
    since = backdate(conn, "minutely", 10)
    report = tick(conn, registry=registry(), max_secs=30)
    rows = ledger(conn, "minutely")
    assert [r[0] for r in rows] == [since + timedelta(minutes=m) for m in range(len(rows))]
    assert len(rows) >= 11  # ten minutes back, and now
    enqueued = [r for r in rows if r[1] == "enqueued"]
    if missed == "latest":
        assert enqueued == [rows[-1]] and {r[1] for r in rows[:-1]} == {"skipped"}
    else:
        assert enqueued == rows
    assert report.fired == len(enqueued)
    jobs = conn.execute("SELECT id, run_at, state, result FROM awc.jobs ORDER BY id").fetchall()
    assert [(j[0], j[1]) for j in jobs] == [(r[2], r[0]) for r in enqueued]  # run_at = fire_at
    assert all(j[2] == "COMPLETED" and j[3] == {"from": "minutely"} for j in jobs)
    assert tick(conn, registry=registry(), max_secs=30).fired == 0  # nothing due twice


def test_fires_older_than_the_catchup_window_are_missed(conn: psycopg.Connection[Any]) -> None:
    add(conn, every_minute(missed="all", catchup_secs=300))
    backdate(conn, "minutely", 20)
    tick(conn, registry=registry(), max_secs=30)
    statuses = [r[1] for r in ledger(conn, "minutely")]
    assert statuses.count("missed") in (14, 15, 16) and "skipped" not in statuses
    assert set(statuses) == {"missed", "enqueued"}


def test_overlap_skip_records_a_fire_while_the_last_job_is_live(
    conn: psycopg.Connection[Any],
) -> None:
    add(conn, every_minute(overlap="skip", missed="all"))
    backdate(conn, "minutely", 3)
    reg = Registry()  # no handler: the jobs stay PENDING, never claimed
    tick(conn, registry=reg, max_secs=30, kinds=["nothing-claims-this"])
    statuses = [r[1] for r in ledger(conn, "minutely")]
    assert statuses[0] == "enqueued" and set(statuses[1:]) == {"overlap"}
    assert conn.execute("SELECT count(*) FROM awc.jobs").fetchone() == (1,)


def test_a_paused_schedule_fires_nothing_and_resumes_from_now(
    conn: psycopg.Connection[Any],
) -> None:
    add(conn, every_minute())
    backdate(conn, "minutely", 30)
    pause(conn, "minutely")
    assert tick(conn, registry=registry(), max_secs=30).fired == 0
    assert ledger(conn, "minutely") == []
    resume(conn, "minutely")
    row = conn.execute("SELECT next_fire_at > now(), paused FROM awc.schedules").fetchone()
    assert row == (True, False)  # no catch-up of what fell due while paused
    assert tick(conn, registry=registry(), max_secs=30).fired == 0


def test_trigger_enqueues_one_job_now_recorded_manual(conn: psycopg.Connection[Any]) -> None:
    add(conn, Schedule("nightly", "0 3 * * *", "report", {"n": 1}))
    job = trigger(conn, "nightly")
    rows = ledger(conn, "nightly")
    assert [(r[1], r[2]) for r in rows] == [("manual", job)]
    assert conn.execute("SELECT kind, payload FROM awc.jobs WHERE id = %s", (job,)
                        ).fetchone() == ("report", {"n": 1})
    with pytest.raises(ScheduleNotFound):
        trigger(conn, "no-such-schedule")


def test_a_schedule_of_ten_thousand_minutes_enqueues_at_most_100_a_call(
    conn: psycopg.Connection[Any],
) -> None:
    add(conn, every_minute(missed="all", catchup_secs=86400))
    backdate(conn, "minutely", 150)
    tick(conn, registry=Registry(), max_secs=30, kinds=["none"])
    assert conn.execute("SELECT count(*) FROM awc.schedule_fires").fetchone() == (100,)
    tick(conn, registry=Registry(), max_secs=30, kinds=["none"])
    assert conn.execute("SELECT count(*) FROM awc.schedule_fires").fetchone()[0] >= 150


# -- the commands ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "option"),
    [(["--cron", "61 * * * *"], "--cron"), (["--cron", "* * *"], "--cron"),
     (["--cron", "@every5m"], "--cron"), (["--timezone", "Mars/Olympus"], "--timezone"),
     (["--payload", "[1]"], "--payload"), (["--catchup-secs", "-1"], "--catchup-secs"),
     (["--max-attempts", "0"], "--max-attempts"), (["--missed", "some"], "--missed"),
     # Parse, but never fire (SPEC §15): not "unexpected error: StopIteration".
     (["--cron", "0 0 31 2 *"], "--cron"), (["--cron", "0 0 */31 * MON#5"], "--cron"),
     # Files of the host's zoneinfo tree, not IANA names: host-dependent fire times.
     (["--timezone", "localtime"], "--timezone"), (["--timezone", "posixrules"], "--timezone"),
     (["--timezone", "posix/Europe/Berlin"], "--timezone"),
     (["--timezone", "right/UTC"], "--timezone")],
)
def test_a_bad_schedule_option_is_a_usage_error_that_writes_nothing(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], args: list[str], option: str
) -> None:
    base = {"--cron": "* * * * *", "--kind": "report"}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    flat = [x for pair in base.items() for x in pair]
    done = run_awc(awc_env, "schedules", "add", "s1", *flat)
    assert done.returncode == 2, done.stderr
    assert option in done.stderr and "Traceback" not in done.stderr
    assert conn.execute("SELECT count(*) FROM awc.schedules").fetchone() == (0,)


def test_the_commands_list_next_history_pause_and_remove(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    done = run_awc(awc_env, "schedules", "add", "nightly", "--cron", "30 2 * * *", "--kind",
                   "noop", "--timezone", "Europe/Berlin")
    assert done.returncode == 0 and done.stdout == "schedule nightly created\n", done.stderr
    nexts = run_awc(awc_env, "schedules", "next", "nightly", "--count", "3").stdout.split()
    instants = [datetime.fromisoformat(line) for line in nexts]
    assert len(instants) == 3 and all(i.utcoffset() in (timedelta(hours=1), timedelta(hours=2))
                                      for i in instants)
    assert all((i.hour, i.minute) in ((2, 30), (3, 0)) for i in instants)
    job = int(run_awc(awc_env, "schedules", "trigger", "nightly").stdout)
    listed = json.loads(run_awc(awc_env, "schedules", "list", "--json").stdout)
    assert listed[0]["name"] == "nightly" and listed[0]["last_job_state"] == "PENDING"
    assert {"cron", "timezone", "kind", "paused", "next_fire_at", "last_fire_at"} <= set(listed[0])
    history = json.loads(run_awc(awc_env, "schedules", "history", "nightly", "--json").stdout)
    assert [(h["status"], h["job_id"]) for h in history] == [("manual", job)]
    assert run_awc(awc_env, "schedules", "pause", "nightly").returncode == 0
    assert json.loads(run_awc(awc_env, "schedules", "list", "--json").stdout)[0]["paused"]
    assert run_awc(awc_env, "schedules", "remove", "nightly").returncode == 0
    for verb in ("remove", "pause", "resume", "trigger", "next", "history"):
        gone = run_awc(awc_env, "schedules", verb, "nightly")
        assert (gone.returncode, gone.stderr) == (1, "awc: schedule 'nightly' does not exist\n")


def test_schedules_next_of_a_rare_cron_prints_what_the_calendar_holds(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    """SPEC §15: `next` on a cron that fires once in decades (a fifth Monday
    of February) prints its fires up to year 9999, not an OverflowError."""
    done = run_awc(awc_env, "schedules", "add", "rare", "--cron", "0 0 * 2 MON#5", "--kind",
                   "noop", "--timezone", "Pacific/Kiritimati")
    assert done.returncode == 0, done.stderr
    done = run_awc(awc_env, "schedules", "next", "rare", "--count", "1000")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    instants = [datetime.fromisoformat(line) for line in done.stdout.split()]
    assert 100 < len(instants) < 1000 and instants == sorted(instants)
    assert all((i.month, i.day, i.weekday()) == (2, 29, 0) for i in instants)


def test_a_stored_schedule_awc_cannot_fire_is_named_by_the_commands_and_can_be_paused(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    """A schedule stored before zones were checked (`localtime`), or by plain
    SQL: `next` and `resume` say which schedule and what is wrong (exit 1,
    one line); `pause` still works; a tick parks it and fires the others."""
    conn.execute("INSERT INTO awc.schedules (name, cron, timezone, kind, paused, next_fire_at) "
                 "VALUES ('host', '0 * * * *', 'localtime', 'report', true, now()), "
                 "('never', '0 0 */31 * MON#5', 'UTC', 'report', false, now()), "
                 # six fields: cronsim reads seconds, and it fired every second
                 "('seconds', '* * * * * *', 'UTC', 'report', false, now())")
    for name, field in (("host", "timezone"), ("never", "cron")):
        for verb in ("next", "resume"):
            done = run_awc(awc_env, "schedules", verb, name)
            assert done.returncode == 1 and done.stderr.startswith(
                f"awc: schedule '{name}' cannot fire: its {field} "), done.stderr
            assert len(done.stderr.splitlines()) == 1
    assert run_awc(awc_env, "schedules", "pause", "never").returncode == 0
    assert conn.execute("SELECT paused, next_fire_at IS NOT NULL FROM awc.schedules "
                        "WHERE name = 'never'").fetchone() == (True, True)
    conn.execute("UPDATE awc.schedules SET paused = false")
    add(conn, every_minute("good"))
    backdate(conn, "good", 2)
    assert tick(conn, registry=registry(), max_secs=30).fired == 1
    assert conn.execute("SELECT name FROM awc.schedules WHERE next_fire_at IS NULL ORDER BY name"
                        ).fetchall() == [("host",), ("never",), ("seconds",)]


SCHEDULES_TOML = """
[schedules.nightly-report]
cron = "0 3 * * *"
timezone = "Europe/Berlin"
kind = "report"
payload = { format = "pdf" }
overlap = "skip"

[schedules.hourly]
cron = "@hourly"
kind = "noop"
"""


def test_sync_declares_schedules_idempotently_and_prunes(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], tmp_path: Path
) -> None:
    add(conn, Schedule("old", "0 0 * * *", "noop"))
    path = tmp_path / "schedules.toml"
    path.write_text(SCHEDULES_TOML)
    done = run_awc(awc_env, "schedules", "sync", str(path), "--json")
    assert json.loads(done.stdout) == {"created": ["hourly", "nightly-report"], "updated": [],
                                       "unchanged": [], "removed": [], "dry_run": False}
    before = conn.execute("SELECT name, next_fire_at, updated_at FROM awc.schedules ORDER BY name"
                          ).fetchall()
    again = run_awc(awc_env, "schedules", "sync", str(path), "--prune", "--json")
    assert json.loads(again.stdout) == {"created": [], "updated": [], "removed": ["old"],
                                        "unchanged": ["hourly", "nightly-report"],
                                        "dry_run": False}
    after = conn.execute("SELECT name, next_fire_at, updated_at FROM awc.schedules ORDER BY name"
                         ).fetchall()
    assert after == [row for row in before if row[0] != "old"]
    row = conn.execute("SELECT payload, overlap FROM awc.schedules WHERE name = 'nightly-report'"
                       ).fetchone()
    assert row == ({"format": "pdf"}, "skip")
    path.write_text(SCHEDULES_TOML + '\n[schedules.bad]\ncron = "* * * * *"\nkind = "k"\n'
                    'colour = "blue"\n')
    bad = run_awc(awc_env, "schedules", "sync", str(path), "--prune")
    assert bad.returncode == 2 and "unknown key 'colour'" in bad.stderr
    assert conn.execute("SELECT count(*) FROM awc.schedules").fetchone() == (2,)


def test_sync_in_python_refuses_a_duplicate_or_bad_schedule_whole(
    conn: psycopg.Connection[Any],
) -> None:
    from tick.schedules import ScheduleError

    with pytest.raises(ScheduleError):
        sync(conn, [every_minute("a"), Schedule("b", "nope", "k")])
    assert conn.execute("SELECT count(*) FROM awc.schedules").fetchone() == (0,)


# -- exactly once under concurrent, killed ticks --------------------------------------------


@pytest.mark.timeout(240)
def test_concurrent_ticks_killed_at_random_fire_each_time_exactly_once(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    names = [f"s{n:02d}" for n in range(40)]
    for n, name in enumerate(names):
        add(conn, Schedule(name, f"*/{1 + n % 5} * * * *", "noop", missed="all",
                           catchup_secs=86400 * 3, overlap="allow"))
    # Simulated hours: each schedule last fired between 12 and 36 hours ago.
    conn.execute("UPDATE awc.schedules SET next_fire_at = date_trunc('minute', now()) - "
                 "make_interval(mins => 720 + (abs(hashtext(name)) % 1440))")
    since = dict(conn.execute("SELECT name, next_fire_at FROM awc.schedules").fetchall())
    rng = random.Random(15)
    env = {**awc_env, "AWC_TICK_MAX_JOBS": "1"}
    for _ in range(4):  # rounds of four ticks, two of them killed at random
        procs = [spawn(env, "tick") for _ in range(4)]
        time.sleep(rng.uniform(0.5, 1.5))
        for proc in rng.sample(procs, 2):
            proc.send_signal(signal.SIGKILL)
        for proc in procs:
            proc.communicate(timeout=60)
    for _ in range(200):  # then ticks until nothing is due
        done = run_awc(env, "tick", "--json")
        assert done.returncode == 0, done.stderr[-2000:]
        due = conn.execute("SELECT count(*) FROM awc.schedules WHERE next_fire_at <= now() "
                           "- interval '1 minute'").fetchone()
        if due == (0,):
            break
    checked_until = conn.execute("SELECT now() - interval '1 minute'").fetchone()[0]
    for name in names:
        cron = conn.execute("SELECT cron FROM awc.schedules WHERE name = %s", (name,)
                            ).fetchone()[0]
        expected = []
        for instant in fires(cron, "UTC", since[name] - timedelta(microseconds=1)):
            if instant > checked_until:
                break
            expected.append(instant)
        rows = [r for r in ledger(conn, name) if r[0] <= checked_until]
        assert [r[0] for r in rows] == expected, name  # one row per fire time, none missing
        assert all(status == "enqueued" and job is not None for _, status, job in rows)
    orphans = conn.execute(
        "SELECT count(*) FROM awc.jobs j WHERE NOT EXISTS (SELECT 1 FROM awc.schedule_fires f "
        "WHERE f.job_id = j.id)").fetchone()
    assert orphans == (0,)  # at most one job per enqueued row, and no job without one
    doubled = conn.execute("SELECT job_id FROM awc.schedule_fires WHERE job_id IS NOT NULL "
                           "GROUP BY job_id HAVING count(*) > 1").fetchall()
    assert doubled == []


def test_the_ledger_is_pruned_by_its_own_setting_never_by_job_pruning(
    conn: psycopg.Connection[Any],
) -> None:
    from tick.maintenance import prune

    conn.execute("INSERT INTO awc.schedule_fires (schedule, fire_at, status, recorded_at) VALUES "
                 "('old', now() - interval '40 days', 'missed', now() - interval '40 days'), "
                 "('new', now() - interval '1 day', 'missed', now() - interval '1 day')")
    prune(conn, 86400 * 365, force=True, ledger_after_secs=30 * 86400)
    kept = conn.execute("SELECT schedule FROM awc.schedule_fires").fetchall()
    assert kept == [("new",)]
    prune(conn, 1, force=True)  # job pruning alone leaves the ledger be
    assert conn.execute("SELECT count(*) FROM awc.schedule_fires").fetchone() == (1,)


def test_the_ledger_keeps_the_fire_of_a_job_still_live(conn: psycopg.Connection[Any]) -> None:
    """SPEC §15: overlap = skip finds the previous job through the ledger; a
    fire older than the ledger's retention whose job was still PENDING was
    pruned, and the next fire enqueued a second job beside it."""
    from tick.maintenance import prune

    add(conn, every_minute("nightly", overlap="skip"))
    live = conn.execute("INSERT INTO awc.jobs (kind) VALUES ('report') RETURNING id").fetchone()
    done = conn.execute("INSERT INTO awc.jobs (kind, state, finished_at) VALUES "
                        "('report', 'FAILED', now()) RETURNING id").fetchone()
    assert live and done
    conn.execute("INSERT INTO awc.schedule_fires (schedule, fire_at, status, job_id, recorded_at) "
                 "VALUES ('nightly', now() - interval '41 days', 'enqueued', %s, "
                 "now() - interval '41 days'), ('nightly', now() - interval '40 days', "
                 "'enqueued', %s, now() - interval '40 days')", (done[0], live[0]))
    prune(conn, 86400 * 365, force=True, ledger_after_secs=30 * 86400)
    assert conn.execute("SELECT job_id FROM awc.schedule_fires").fetchall() == [(live[0],)]
    backdate(conn, "nightly", 1)
    tick(conn, registry=Registry(), max_secs=30, kinds=["nothing-claims-this"])
    assert conn.execute("SELECT status FROM awc.schedule_fires ORDER BY fire_at DESC LIMIT 1"
                        ).fetchone() == ("overlap",)


@pytest.mark.parametrize(("cron", "zone"), [("bogus", "UTC"), ("* * * * *", "Mars/Olympus"),
                                              ("0 0 30 2 *", "UTC")])
def test_a_schedule_written_past_the_checks_is_parked_and_the_others_fire(
    conn: psycopg.Connection[Any], cron: str, zone: str
) -> None:
    add(conn, every_minute("good"))
    backdate(conn, "good", 2)
    conn.execute("INSERT INTO awc.schedules (name, cron, timezone, kind, next_fire_at) "
                 "VALUES ('bad', %s, %s, 'report', now() - interval '1 hour')", (cron, zone))
    report = tick(conn, registry=registry(), max_secs=30)
    assert report.fired == 1 and report.stop_reason == "drained"
    assert conn.execute("SELECT next_fire_at FROM awc.schedules WHERE name = 'bad'"
                        ).fetchone() == (None,)
    assert ledger(conn, "bad") == []
    add(conn, Schedule("bad", "0 * * * *", "report"))  # an operator's fix starts it again
    assert conn.execute("SELECT next_fire_at > now() FROM awc.schedules WHERE name = 'bad'"
                        ).fetchone() == (True,)
    conn.execute("UPDATE awc.schedules SET next_fire_at = NULL WHERE name = 'bad'")
    assert add(conn, Schedule("bad", "0 * * * *", "report")) == "updated"  # same, yet parked
    assert conn.execute("SELECT next_fire_at > now() FROM awc.schedules WHERE name = 'bad'"
                        ).fetchone() == (True,)


# -- sync: concurrent deploys, an operator's pause, saying what it did (SPEC §15) -------------


def schedules_file(names: list[str], minute: int) -> str:
    return "".join(f'[schedules.{name}]\ncron = "{minute} * * * *"\nkind = "noop"\n'
                   f'payload = {{ deploy = {minute} }}\n\n' for name in names)


@pytest.mark.timeout(240)
def test_concurrent_syncs_of_different_files_take_turns_and_all_succeed(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], tmp_path: Path
) -> None:
    """Two deploys syncing at once, their files listing the schedules in
    different orders (and --prune removing what the other just wrote),
    locked the same rows in different orders: "deadlock detected", exit 1.
    Now one waits for the other and every run exits 0."""
    names = [f"s{n:03d}" for n in range(150)]
    rng = random.Random(14)
    for round_ in range(3):
        procs = []
        for n in range(4):
            mine = rng.sample(names, k=120 if n % 2 else 150)  # each in its own order
            path = tmp_path / f"r{round_}-{n}.toml"
            path.write_text(schedules_file(mine, round_ * 4 + n))
            procs.append(spawn(awc_env, "schedules", "sync", str(path), "--prune", "--json"))
        outcomes = [(proc.wait(timeout=120), proc.communicate()) for proc in procs]
        for code, (out, err) in outcomes:
            assert code == 0 and err == "", err
            assert json.loads(out)["dry_run"] is False
    # The last sync to commit left its file exactly; the ledger of what each
    # did is consistent: every schedule exists once.
    count = conn.execute("SELECT count(*), count(DISTINCT payload) FROM awc.schedules"
                         ).fetchone()
    assert count[0] in (120, 150) and count[1] == 1


def test_sync_keeps_an_operators_pause_unless_the_file_names_paused(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], tmp_path: Path
) -> None:
    """SPEC §15: `paused` changes only when the file names it. On-call
    paused a schedule; a deploy syncing a file without the key kept
    resuming it."""
    path = tmp_path / "schedules.toml"
    path.write_text(SCHEDULES_TOML)
    assert run_awc(awc_env, "schedules", "sync", str(path)).returncode == 0
    assert run_awc(awc_env, "schedules", "pause", "hourly").returncode == 0
    paused = conn.execute("SELECT paused, next_fire_at, updated_at FROM awc.schedules "
                          "WHERE name = 'hourly'").fetchone()
    done = run_awc(awc_env, "schedules", "sync", str(path))
    assert done.returncode == 0 and "hourly" not in done.stdout, done.stdout
    assert done.stdout == "0 created, 0 updated, 2 unchanged, 0 removed\n"
    assert conn.execute("SELECT paused, next_fire_at, updated_at FROM awc.schedules "
                        "WHERE name = 'hourly'").fetchone() == paused
    # An edit of another key keeps the pause too; only `paused` moves it.
    path.write_text(SCHEDULES_TOML.replace('kind = "noop"', 'kind = "noop2"'))
    done = run_awc(awc_env, "schedules", "sync", str(path))
    assert done.stdout.splitlines()[0] == "schedule hourly updated"
    assert conn.execute("SELECT paused, kind FROM awc.schedules WHERE name = 'hourly'"
                        ).fetchone() == (True, "noop2")
    path.write_text(SCHEDULES_TOML.replace('kind = "noop"', 'kind = "noop2"\npaused = false'))
    assert run_awc(awc_env, "schedules", "sync", str(path)).stdout.startswith(
        "schedule hourly updated\n")
    resumed = conn.execute("SELECT paused, next_fire_at > now() FROM awc.schedules "
                           "WHERE name = 'hourly'").fetchone()
    assert resumed == (False, True)
    path.write_text(SCHEDULES_TOML.replace('kind = "noop"', 'kind = "noop2"\npaused = true'))
    run_awc(awc_env, "schedules", "sync", str(path))
    assert conn.execute("SELECT paused FROM awc.schedules WHERE name = 'hourly'"
                        ).fetchone() == (True,)
    # A new schedule without the key runs.
    add(conn, Schedule("fresh", "0 0 * * *", "noop"))
    assert conn.execute("SELECT paused FROM awc.schedules WHERE name = 'fresh'"
                        ).fetchone() == (False,)


def test_sync_names_what_it_does_and_a_dry_run_writes_nothing(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], tmp_path: Path
) -> None:
    """SPEC §15: `sync --prune` of an empty file removed every schedule and
    said only counts. It names each schedule it created, updated and
    removed, and `--dry-run` says the same and writes nothing."""
    for name in ("a-first", "b-second", "c-third"):
        add(conn, Schedule(name, "0 0 * * *", "noop"))
    before = conn.execute("SELECT * FROM awc.schedules ORDER BY name").fetchall()
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    dry = run_awc(awc_env, "schedules", "sync", str(empty), "--prune", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines() == [
        "schedule a-first would be removed", "schedule b-second would be removed",
        "schedule c-third would be removed",
        "0 created, 0 updated, 0 unchanged, 3 removed (dry run: nothing written)"]
    assert conn.execute("SELECT * FROM awc.schedules ORDER BY name").fetchall() == before
    path = tmp_path / "s.toml"
    path.write_text('[schedules.b-second]\ncron = "0 1 * * *"\nkind = "noop"\n'
                    '[schedules.a-first]\ncron = "0 0 * * *"\nkind = "noop"\n'
                    '[schedules.d-new]\ncron = "0 0 * * *"\nkind = "noop"\n')
    as_json = run_awc(awc_env, "schedules", "sync", str(path), "--prune", "--dry-run", "--json")
    assert json.loads(as_json.stdout) == {
        "created": ["d-new"], "updated": ["b-second"], "unchanged": ["a-first"],
        "removed": ["c-third"], "dry_run": True}
    assert conn.execute("SELECT * FROM awc.schedules ORDER BY name").fetchall() == before
    done = run_awc(awc_env, "schedules", "sync", str(path), "--prune")
    assert done.stdout.splitlines() == [
        "schedule d-new created", "schedule b-second updated", "schedule c-third removed",
        "1 created, 1 updated, 1 unchanged, 1 removed"]
    assert [r[0] for r in conn.execute("SELECT name FROM awc.schedules ORDER BY name")] == [
        "a-first", "b-second", "d-new"]
    assert sync(conn, [Schedule("x\nschedule a-first removed", "0 0 * * *", "noop")],
                dry_run=True)["created"] == ["x\nschedule a-first removed"]
    path.write_text('[schedules."x\\nschedule a-first removed"]\ncron = "0 0 * * *"\n'
                    'kind = "noop"\n')
    forged = run_awc(awc_env, "schedules", "sync", str(path), "--dry-run")
    assert forged.stdout.splitlines()[0] == \
        'schedule "x\\nschedule a-first removed" would be created'


@pytest.mark.parametrize(("line", "named"), [
    ('cron = "0 0 31 2 *"', "schedules.b.cron"), ('cron = "0 0 */31 * MON#5"', "schedules.b.cron"),
    ('cron = "@hourly"\ntimezone = "localtime"', "schedules.b.timezone"),
    ('cron = "@hourly"\ntimezone = "posix/Europe/Berlin"', "schedules.b.timezone"),
    ('cron = "@hourly"\npaused = "no"', "schedules.b.paused"),
])
def test_sync_of_a_schedule_that_cannot_fire_names_it_and_writes_nothing(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], tmp_path: Path, line: str, named: str
) -> None:
    """SPEC §15: a usage error (exit 2) naming the schedule and its key, in a
    file of many; nothing is written, not even the good schedule."""
    path = tmp_path / "s.toml"
    path.write_text(f'[schedules.a]\ncron = "@daily"\nkind = "noop"\n'
                    f'[schedules.b]\n{line}\nkind = "noop"\n')
    done = run_awc(awc_env, "schedules", "sync", str(path), "--prune")
    assert done.returncode == 2 and f"{named}: " in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "unexpected" not in done.stderr
    assert conn.execute("SELECT count(*) FROM awc.schedules").fetchone() == (0,)


def test_a_tick_fires_schedules_only_until_its_deadline(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    """SPEC §6, §15: firing is a phase of the tick, bounded by its deadline
    like the claims: `--max-secs 1` with more due fires than a second can
    record ends in about a second, and the next tick goes on where it stopped."""
    # Each schedule has 2,000 minutes of fires due: 1,000 ledger rows a call.
    conn.execute("INSERT INTO awc.schedules (name, cron, kind, missed, next_fire_at) "
                 "SELECT 'busy-' || n, '* * * * *', 'noop', 'all', "
                 "date_trunc('minute', now()) - interval '2000 minutes' "
                 "FROM generate_series(1, 300) AS n")
    began = time.monotonic()
    ticked = run_awc(awc_env, "tick", "--max-secs", "1", "--json")
    took = time.monotonic() - began
    assert ticked.returncode == 0, ticked.stderr
    report = json.loads(ticked.stdout)
    # What is left after the firing still claims (half of it, in so short a
    # run): the jobs fired may all be run by then.
    assert report["stop_reason"] in ("deadline", "drained"), report
    assert report["duration_s"] < 2.0, report  # the firing had 5 s of its own budget
    assert took < 6.0  # the process's start and exit included
    recorded = conn.execute("SELECT count(DISTINCT schedule) FROM awc.schedule_fires"
                            ).fetchone()
    assert recorded is not None and recorded[0] < 300  # not all: time was up
    rows = conn.execute("SELECT count(*) FROM awc.schedule_fires").fetchone()
    events = [json.loads(line) for line in ticked.stderr.splitlines()]
    # One event per ledger row, reported inside the deadline as they were recorded.
    assert rows == (sum(1 for e in events if e.get("event") == "schedule_fire"),)
    again = run_awc(awc_env, "tick", "--max-secs", "3", "--json")
    assert again.returncode == 0, again.stderr
    more = conn.execute("SELECT count(DISTINCT schedule) FROM awc.schedule_fires").fetchone()
    assert more is not None and more[0] > recorded[0]


def test_maintenance_at_its_deadline_leaves_firing_and_pruning_to_the_next_pass(
    conn: psycopg.Connection[Any],
) -> None:
    """SPEC §6, §7.3: a tick whose deadline has come fires and prunes
    nothing more (rescue only), and leaves the prune's hourly mark alone, so
    the next pass does both."""
    from tick.maintenance import run_maintenance

    add(conn, every_minute())
    backdate(conn, "minutely", 2)
    old = enqueue(conn, "report")
    conn.execute("UPDATE awc.jobs SET state = 'COMPLETED', finished_at = now() - "
                 "interval '30 days' WHERE id = %s", (old,))
    conn.execute("UPDATE awc.maintenance SET last_run_at = '-infinity' WHERE step = 'prune'")
    done = run_maintenance(conn, 86400, deadline=time.monotonic())
    assert (done.fired, done.fires, done.pruned) == (0, (), 0)
    assert ledger(conn, "minutely") == []
    assert conn.execute("SELECT count(*) FROM awc.jobs WHERE id = %s", (old,)).fetchone() == (1,)
    assert conn.execute("SELECT last_run_at = '-infinity' FROM awc.maintenance "
                        "WHERE step = 'prune'").fetchone() == (True,)
    done = run_maintenance(conn, 86400, deadline=time.monotonic() + 30)
    assert done.fired == 1 and done.pruned == 1


def test_the_schedule_commands_print_a_name_a_terminal_would_act_on_escaped(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    # add, pause, resume and remove echoed the name raw: an OSC sequence in
    # it set the terminal's title (the tables and sync escaped it already).
    name = "night\x1b]0;pwned\x07"
    done = run_awc(awc_env, "schedules", "add", name, "--cron", "@daily", "--kind", "k")
    assert done.returncode == 0, done.stderr
    for verb in ("pause", "resume", "remove"):
        acted = run_awc(awc_env, "schedules", verb, name)
        assert acted.returncode == 0, acted.stderr
        assert "\x1b" not in acted.stdout and "\\u001b" in acted.stdout, acted.stdout
    assert "\x1b" not in done.stdout and "\\u001b" in done.stdout


def test_a_host_without_time_zone_data_leaves_schedules_due_not_parked(
    conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # One worker whose tzdata could not be read parked every schedule due
    # in its tick, for good, on every host. Now this host leaves them due
    # and says so, once a schedule a pass.
    import tick.schedules.times as times
    from tick.schedules.firing import fire_due

    add(conn, every_minute("a"))
    add(conn, every_minute("b"))
    backdate(conn, "a", 2)
    backdate(conn, "b", 2)

    def no_tzdata() -> frozenset[str]:
        raise times.HostFault("timezone", "cannot be checked: the tzdata package is not there")

    with monkeypatch.context() as patched:
        patched.setattr(times, "iana_names", no_tzdata)
        done = fire_due(conn)
    assert (done.enqueued, done.parked) == (0, [])
    assert sorted(name for name, _ in done.unplanned) == ["a", "b"]
    assert conn.execute("SELECT count(*) FROM awc.schedules WHERE next_fire_at IS NULL"
                        ).fetchone() == (0,)
    assert fire_due(conn).enqueued == 2  # a host that can plan them fires them


def test_resume_starts_a_parked_schedule_again_from_now(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    # A tick parks a schedule it cannot plan (no next fire); resume said
    # "resumed" and left it parked.
    add(conn, every_minute("parked"))
    conn.execute("UPDATE awc.schedules SET next_fire_at = NULL WHERE name = 'parked'")
    done = run_awc(awc_env, "schedules", "resume", "parked")
    assert done.returncode == 0, done.stderr
    row = conn.execute("SELECT next_fire_at > now() FROM awc.schedules WHERE name = 'parked'"
                       ).fetchone()
    assert row == (True,)


def test_a_schedule_far_behind_leaves_a_short_tick_time_for_its_jobs(
    conn: psycopg.Connection[Any],
) -> None:
    # A minutely schedule whose next fire is years back (a restored backup,
    # a long outage) has millions of fires to record as missed; it took each
    # tick's whole firing budget, and a tick of 3 s ran no job at all.
    add(conn, every_minute("behind"))
    conn.execute("UPDATE awc.schedules SET next_fire_at = '2020-01-01' WHERE name = 'behind'")
    job = enqueue(conn, "report", {"n": 1})
    began = time.monotonic()
    report = tick(conn, registry=registry(), max_secs=3)
    assert time.monotonic() - began < 4.5
    assert conn.execute("SELECT state FROM awc.jobs WHERE id = %s", (job,)).fetchone() == (
        "COMPLETED",)
    assert report.completed >= 1
    missed = conn.execute("SELECT count(*) FROM awc.schedule_fires WHERE status = 'missed'"
                          ).fetchone()
    assert missed is not None and missed[0] > 0  # and firing went on, within its share


def test_a_list_of_more_schedules_than_it_prints_says_so(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    # It stopped at 10,000 in silence: the 10,001st by name was just absent.
    conn.execute("INSERT INTO awc.schedules (name, cron, kind, next_fire_at) "
                 "SELECT 's' || lpad(n::text, 5, '0'), '@daily', 'k', now() + interval '1 day' "
                 "FROM generate_series(1, 10001) AS n")
    done = run_awc(awc_env, "schedules", "list", "--json")
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)) == 10_000
    assert done.stderr.strip() == (
        "awc: the first 10,000 schedules by name are listed; there are more")
