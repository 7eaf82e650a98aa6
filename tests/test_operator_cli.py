"""SPEC §22, what the operator does next: the CLI's smaller items. Every
table says its zone, a schedule's fires show in its own zone as well;
`awc status` names schedules that missed or overlapped a fire in the last
day; `awc ticks` shows released, rescued and continued and takes `--since
1h|24h|today`; `awc schedules next --cron` previews an expression; choices
take any case; shell completion is produced."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import click
import psycopg

from tests.support import awc_command, run_awc
from tick.producer import enqueue

# The bulk commands are another change's (SPEC §22, retry/cancel/discard).
_NOT_HERE = {"retry", "cancel", "discard"}


def _choices(command: click.Command, path: str = "awc") -> list[tuple[str, click.Choice[Any]]]:
    found: list[tuple[str, click.Choice[Any]]] = []
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            if name not in _NOT_HERE:
                found += _choices(sub, f"{path} {name}")
    for param in command.params:
        if isinstance(param.type, click.Choice):
            found.append((f"{path} {param.name}", param.type))
    return found


def test_every_choice_of_every_command_takes_any_case() -> None:
    """The class, not one example: each option with fixed values (`--state`,
    `--driver`, `--missed`, `--overlap`, ...) accepts `failed` for FAILED."""
    from tick.cli import cli

    found = _choices(cli)
    assert {"awc jobs list state", "awc ticks driver"} <= {where for where, _ in found}
    assert [where for where, kind in found if kind.case_sensitive] == []


def test_a_lower_case_state_lists_the_jobs_in_that_state(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    failed = enqueue(conn, "noop")
    conn.execute("UPDATE awc.jobs SET state = 'FAILED', finished_at = now() WHERE id = %s",
                 (failed,))
    enqueue(conn, "noop")
    listed = run_awc(awc_env, "jobs", "list", "--state", "failed", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [json.loads(line)["id"] for line in listed.stdout.splitlines()] == [failed]
    for args in (("ticks", "--driver", "Tick"), ("schedules", "add", "s", "--cron", "@daily",
                                                  "--kind", "noop", "--missed", "ALL",
                                                  "--overlap", "Skip")):
        done = run_awc(awc_env, *args)
        assert done.returncode == 0, (args, done.stderr)
    row = conn.execute("SELECT missed, overlap FROM awc.schedules").fetchone()
    assert row == ("all", "skip")  # stored as listed, whatever the case typed
    bad = run_awc(awc_env, "jobs", "list", "--state", "failing")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_the_shell_completion_script_is_produced(awc_env: dict[str, str]) -> None:
    """README "Shell completion": `_AWC_COMPLETE=bash_source awc` prints the
    script; completing `--state f` offers FAILED (in the case typed)."""
    import subprocess

    for shell, marker in (("bash", "complete -o nosort -F"), ("zsh", "#compdef awc"),
                          ("fish", "complete --no-files --command awc")):
        done = subprocess.run(awc_command(), env={**awc_env, "_AWC_COMPLETE": f"{shell}_source"},
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert marker in done.stdout, shell
    offered = subprocess.run(
        awc_command(), env={**awc_env, "_AWC_COMPLETE": "bash_complete",
                            "COMP_WORDS": "awc jobs list --state f", "COMP_CWORD": "4"},
        capture_output=True, text=True, timeout=60)
    assert offered.returncode == 0, offered.stderr
    assert "plain,failed" in offered.stdout.lower().splitlines()


_INSTANT = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d([+-]\d\d:\d\d)")


def test_every_table_prints_its_instants_with_their_offset(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    """A time in a table is never ambiguous: UTC with `+00:00`, and a
    schedule's fires in its own zone as well (`*_local`)."""
    enqueue(conn, "noop")
    assert run_awc(awc_env, "tick").returncode == 0
    assert run_awc(awc_env, "schedules", "add", "berlin", "--cron", "0 3 * * *", "--kind",
                   "noop", "--timezone", "Europe/Berlin").returncode == 0
    conn.execute("INSERT INTO awc.schedule_fires (schedule, fire_at, status) "
                 "VALUES ('berlin', '2026-01-15 02:00:00+00', 'missed')")
    for args in (("jobs", "list"), ("ticks",), ("schedules", "list"),
                 ("schedules", "history", "berlin")):
        out = run_awc(awc_env, *args).stdout
        offsets = _INSTANT.findall(out)
        assert offsets, (args, out)
        assert not re.search(r"\d\d:\d\d:\d\d(?![+-.\d])", out), (args, out)
        if args[0] == "schedules":
            assert "+01:00" in offsets or "+02:00" in offsets, out  # Berlin's wall time
            assert "+00:00" in offsets, out
    history = run_awc(awc_env, "schedules", "history", "berlin").stdout
    assert "2026-01-15 03:00:00+01:00" in history and "2026-01-15 02:00:00+00:00" in history


def test_status_names_the_schedules_that_missed_or_overlapped_in_the_last_day(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    for name in ("nightly", "hourly", "old", "fine"):
        assert run_awc(awc_env, "schedules", "add", name, "--cron", "@daily", "--kind",
                       "noop").returncode == 0
    conn.execute("""INSERT INTO awc.schedule_fires (schedule, fire_at, status, recorded_at)
                    VALUES ('nightly', now() - interval '2 hours', 'missed', now()),
                           ('hourly', now() - interval '1 hour', 'overlap', now()),
                           ('hourly', now() - interval '2 hours', 'overlap', now()),
                           ('old', now() - interval '3 days', 'missed',
                            now() - interval '3 days'),
                           ('fine', now() - interval '1 hour', 'enqueued', now())""")
    data = json.loads(run_awc(awc_env, "status", "--json").stdout)
    assert [(p["schedule"], p["status"], p["fires"]) for p in data["schedule_problems"]] == [
        ("hourly", "overlap", 2), ("nightly", "missed", 1)]
    text = run_awc(awc_env, "status").stdout
    assert "schedule nightly: 1 missed" in text and "schedule hourly: 2 overlap" in text
    assert "schedule old" not in text and "schedule fine" not in text
    assert re.search(r"schedule nightly: 1 missed fire\(s\) in the last 24 h, the last at "
                     r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\+00:00", text), text


def test_ticks_show_released_rescued_and_continued(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    conn.execute("""INSERT INTO awc.ticks (driver, worker_id, started_at, finished_at,
                        released, rescued, continued, stop_reason)
                    VALUES ('tick', 'w', now(), now(), 7, 8, 9, 'drained')""")
    lines = run_awc(awc_env, "ticks").stdout.splitlines()
    header = lines[0].split()
    row = dict(zip(header, lines[1].split()[:3] + lines[1].split()[5:], strict=False))
    assert {"released", "rescued", "continued"} <= set(header)
    assert (row["released"], row["rescued"], row["continued"]) == ("7", "8", "9")


def test_ticks_since_takes_a_span_or_today(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    """`--since 1h`, `24h`, `7d`, `today` (00:00 UTC), or an instant; on the
    database's clock."""
    now = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
    midnight = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    ages = {"recent": timedelta(minutes=30), "hours": timedelta(hours=5),
            "days": timedelta(days=3)}
    for worker, age in ages.items():
        conn.execute("INSERT INTO awc.ticks (driver, worker_id, started_at, finished_at) "
                     "VALUES ('tick', %s, %s, %s)", (worker, now - age, now - age))

    def since(value: str) -> set[str]:
        done = run_awc(awc_env, "ticks", "--since", value, "--json")
        assert done.returncode == 0, done.stderr
        return {row["worker_id"] for row in json.loads(done.stdout)}

    assert since("1h") == {"recent"}
    assert since("24h") == {"recent", "hours"}
    assert since("7d") == since("7D") == {"recent", "hours", "days"}
    assert since("today") == {w for w, age in ages.items() if now - age >= midnight}
    assert since((now - timedelta(hours=1)).isoformat()) == {"recent"}
    for bad in ("yesterday", "1y", "-1h", "99999999999h"):
        done = run_awc(awc_env, "ticks", "--since", bad)
        assert done.returncode == 2, (bad, done.stderr)
        assert "--since" in done.stderr and "Traceback" not in done.stderr


def test_next_previews_a_cron_before_it_is_added(awc_env: dict[str, str]) -> None:
    """`awc schedules next --cron EXPR --timezone Z`: the fires in Z's wall
    time, nothing written, no database needed."""
    env = {k: v for k, v in awc_env.items() if k != "DATABASE_URL"}
    done = run_awc(env, "schedules", "next", "--cron", "30 2 * * *", "--timezone",
                   "America/New_York", "--count", "3")
    assert done.returncode == 0, done.stderr
    fires = [datetime.fromisoformat(line) for line in done.stdout.split()]
    assert len(fires) == 3 and fires == sorted(fires) and fires[0] > datetime.now(UTC)
    assert all((f.hour, f.minute) == (2, 30) or f.hour == 3 for f in fires)
    assert {f.utcoffset() for f in fires} <= {timedelta(hours=-5), timedelta(hours=-4)}
    utc = run_awc(env, "schedules", "next", "--cron", "@hourly").stdout.split()
    assert len(utc) == 5 and all(line.endswith("+00:00") for line in utc)
    for args, hint in ((("--cron", "61 * * * *"), "--cron"),
                       (("--cron", "@daily", "--timezone", "Mars/Base"), "--timezone"),
                       ((), "NAME"), (("x", "--cron", "@daily"), "NAME"),
                       (("x", "--timezone", "UTC"), "--timezone")):
        bad = run_awc(env, "schedules", "next", *args)
        assert bad.returncode == 2, (args, bad.stderr)
        assert hint in bad.stderr and "Traceback" not in bad.stderr


def test_status_jobs_list_and_ticks_stay_bounded_by_megabyte_rows(
    conn: psycopg.Connection[Any], awc_env: dict[str, str]
) -> None:
    """Rows written by plain SQL with a megabyte kind, error or worker id:
    `awc status` printed a 1 MB line for the kind and 2.7 MB for the
    escaped error; `awc jobs list` and `awc ticks` read every byte of
    every row to print 60 characters of each (243 MB for 100 rows)."""
    big = "\x1b" * 1_000_000
    conn.execute("INSERT INTO awc.jobs (kind, state, last_error, finished_at) "
                 "VALUES (%s, 'FAILED', %s, now())", ("k" * 1_000_000, big))
    conn.execute("INSERT INTO awc.ticks (driver, worker_id, started_at, finished_at, error) "
                 "VALUES ('tick', %s, now() - interval '1 minute', now(), %s)", ("w" * 10**6, big))
    status = run_awc(awc_env, "status")
    assert status.returncode == 0, status.stderr[-2000:]
    assert len(status.stdout) < 5_000, len(status.stdout)
    as_json = run_awc(awc_env, "status", "--json")
    assert as_json.returncode == 0 and len(as_json.stdout) < 20_000, len(as_json.stdout)
    listed = run_awc(awc_env, "jobs", "list", "--json")
    assert listed.returncode == 0, listed.stderr[-2000:]
    (line,) = listed.stdout.splitlines()  # JSON lines
    job = json.loads(line)
    assert (len(job["kind"]), len(job["last_error"])) == (1000, 1000)
    ticks = run_awc(awc_env, "ticks", "--json")
    assert ticks.returncode == 0, ticks.stderr[-2000:]
    (row,) = json.loads(ticks.stdout)  # one JSON array
    assert (len(row["worker_id"]), len(row["error"])) == (1000, 1000)
