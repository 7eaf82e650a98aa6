"""SPEC §3: a command's whole-number argument (an id, a count, a priority,
a port) is ASCII digits, or a usage error (exit 2) that quotes nothing of
it. click's integer read other scripts' digits, underscores, a `+` and
spaces: `awc enqueue --after` with an Arabic-Indic one made a job wait
for job 1, and a refusal echoed 5,000 digits back."""

from __future__ import annotations

import signal
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from tick.cli import cli

pytestmark = pytest.mark.timeout(60)

WRITTEN_OTHERWISE = ["\u0661", "1_0", "+1", " 1", "1 ", "0x10", "1e3", "\u0661\u0660", "", "-"]


def usage_error(args: list[str], env: dict[str, str]) -> str:
    result = CliRunner().invoke(cli, args, env=env)
    assert result.exit_code == 2, (result.exit_code, result.output[-500:])
    return result.output


@pytest.mark.parametrize("written", WRITTEN_OTHERWISE)
def test_a_job_id_written_otherwise_is_a_usage_error(
        conn: psycopg.Connection[Any], awc_env: dict[str, str], written: str) -> None:
    for args in (["enqueue", "noop", "--after", written], ["jobs", "show", written],
                 ["wait", written], ["retry", written]):
        output = usage_error(args, awc_env)
        assert "is not a whole number written in the digits 0-9" in output, args
    assert conn.execute("SELECT count(*) FROM awc.jobs").fetchone() == (0,)


def test_counts_and_priorities_are_read_the_same_way(awc_env: dict[str, str]) -> None:
    for args in (["enqueue", "noop", "--priority", "+1"], ["tick", "--max-jobs", "1_0"],
                 ["jobs", "list", "--limit", "\u0665"], ["limits", "set", "kind:noop",
                                                       "--max-running", " 2"]):
        assert "is not a whole number" in usage_error(args, awc_env), args


def test_a_refusal_quotes_nothing_of_the_argument(awc_env: dict[str, str]) -> None:
    digits = "9" * 5000
    output = usage_error(["enqueue", "noop", "--after", digits], awc_env)
    assert "999999" not in output and len(output) < 1000
    output = usage_error(["enqueue", "noop", "--priority", "40000"], awc_env)
    assert "must be between -32768 and 32767" in output and "40000" not in output


def test_whole_numbers_in_digits_still_work(
        conn: psycopg.Connection[Any], awc_env: dict[str, str]) -> None:
    result = CliRunner().invoke(cli, ["enqueue", "noop", "--priority", "-5"], env=awc_env)
    assert result.exit_code == 0, result.output
    assert conn.execute("SELECT priority FROM awc.jobs").fetchall() == [(-5,)]


@pytest.mark.parametrize(("flag", "value", "bounds"), [
    ("--max-secs", "0", "between 1 and 604800"), ("--max-jobs", "0", "between 1 and 10000000"),
    ("--concurrency", "257", "between 1 and 256")])
def test_a_run_flag_out_of_range_is_a_usage_error_naming_the_flag(
        awc_env: dict[str, str], flag: str, value: str, bounds: str) -> None:
    # It was a settings error naming AWC_TICK_MAX_SECS (exit 1) for a flag.
    output = usage_error(["tick", flag, value], awc_env)
    assert flag in output and bounds in output


def test_a_tick_of_one_second_claims(conn: psycopg.Connection[Any],
                                     awc_env: dict[str, str]) -> None:
    """The budget counts from the process's start, and no claim went out
    with less than a second left: `--max-secs 1` ran nothing, ever."""
    from tests.support import run_awc

    for _ in range(5):
        conn.execute("INSERT INTO awc.jobs (kind) VALUES ('noop')")
    done = run_awc(awc_env, "tick", "--max-secs", "1", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert conn.execute("SELECT count(*) FROM awc.jobs WHERE state = 'PENDING'").fetchone() == (0,)


def test_a_number_just_past_the_range_is_told_so(awc_env: dict[str, str]) -> None:
    """Twenty digits are a whole number past a bigint, not "not a whole
    number" (the pattern stopped at 19 digits)."""
    output = usage_error(["wait", "9" * 20], awc_env)
    assert "must be between 1 and 9223372036854775807" in output
    assert "9" * 20 not in output


def signalled(env: dict[str, str], args: tuple[str, ...], ready: Any, what: str,
              signum: int = signal.SIGTERM) -> tuple[int, str, str, Any]:
    """Start `awc ARGS`, wait until `ready()` gives a value, send `signum`:
    the exit code, stdout, stderr, and that value."""
    from tests.support import spawn, wait_for

    proc = spawn(env, *args)
    try:
        seen = wait_for(ready, what=what)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out, err, seen


@pytest.mark.parametrize(("signum", "said"), [(signal.SIGINT, "interrupted"),
                                             (signal.SIGTERM, "terminated")])
def test_a_signal_during_a_command_is_one_awc_line(
        conn: psycopg.Connection[Any], awc_env: dict[str, str], signum: int, said: str) -> None:
    """^C while `awc wait` waits: click printed a blank line and awc said
    `awc: aborted`; SIGTERM (a supervisor's stop, `timeout`): the process
    died of the signal with nothing said. Now one line each, `awc:
    interrupted` and `awc: terminated`, exit 1."""
    from tick.producer import enqueue

    job = enqueue(conn, "noop")
    code, out, err, _ = signalled(
        awc_env, ("wait", str(job), "--timeout", "60"),
        lambda: conn.execute("SELECT waited FROM awc.jobs WHERE id = %s",
                             (job,)).fetchone() == (True,), "the wait to begin", signum)
    assert (code, err, out) == (1, f"awc: {said}\n", "")


def test_sigterm_stops_the_console_as_a_clean_stop(awc_env: dict[str, str]) -> None:
    """`awc ui` stops gracefully on SIGTERM and ends by the signal, as a
    service manager expects of a clean stop: awc's own SIGTERM line made it
    exit 1 (`awc: terminated`), a failed unit."""
    from tests.support import start_console

    proc, _ = start_console(awc_env)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGTERM, err
    assert "awc:" not in err


def test_sigterm_while_the_console_starts_is_a_clean_stop_too(awc_env: dict[str, str]) -> None:
    """A stop in the console's first half second (its imports, before it
    serves) was `awc: terminated`, exit 1, a failed unit: the console put
    the default in place only after importing uvicorn. Signalled at steps
    through its start, it ends by the signal every time."""
    import time

    from tests.support import spawn, stop

    for delay in (0.1, 0.15, 0.2, 0.25, 0.3, 0.4):
        proc = spawn({**awc_env, "AWC_UI_TOKEN": "t" * 32}, "ui", "--port", "0")
        try:
            time.sleep(delay)  # where in its start the stop lands, not a synchronisation
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
        finally:
            stop(proc)
        assert proc.returncode == -signal.SIGTERM, (delay, err)
        assert "awc:" not in err, (delay, err)


def test_sigterm_while_the_server_runs_a_statement_cancels_it(
        db_url: str, awc_env: dict[str, str]) -> None:
    """SIGTERM while `awc migrate` waits for another process's migration
    lock: psycopg's warnings, then `awc: terminated`, and the server's
    backend went on waiting for the lock after the client had gone. Taken
    as ^C is, the statement is cancelled and the line is one."""
    from tests.support import seen_waiting_on_a_lock, wait_for
    from tick.migrate import MIGRATION_LOCK_KEY

    with psycopg.connect(db_url, autocommit=True) as holder, \
            psycopg.connect(db_url, autocommit=True) as watcher:
        holder.execute("BEGIN")
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
        waiting = ("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                   "AND wait_event_type = 'Lock' AND pid <> %s")

        def migration_waits() -> Any:
            row = watcher.execute(waiting, (holder.info.backend_pid,)).fetchone()
            if row is not None:
                assert seen_waiting_on_a_lock(watcher, row[0])
            return row

        code, _, err, (pid,) = signalled(awc_env, ("migrate",), migration_waits,
                                         "the migration's wait")
        assert (code, err) == (1, "awc: terminated\n")
        wait_for(lambda: watcher.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s "
                                         "AND wait_event_type = 'Lock'", (pid,)).fetchone()
                 == (0,), timeout=10, what="the server's backend to stop waiting")
        holder.execute("ROLLBACK")


def test_sigterm_before_a_tick_runs_is_told_as_terminated_in_its_event(
        awc_env: dict[str, str], tmp_path: Any) -> None:
    """SIGTERM while `awc tick --as-events` imports its handlers: the
    `tick_failed` event said `interrupted`, as for an operator's ^C."""
    import json

    marker = tmp_path / "importing"
    (tmp_path / "slow_import_kinds.py").write_text(
        "import pathlib, time\n"
        f"pathlib.Path({str(marker)!r}).write_text('1')\n"
        "time.sleep(30)\n")
    env = {**awc_env, "AWC_HANDLER_MODULES": "slow_import_kinds",
           "PYTHONPATH": f"{tmp_path}:{awc_env['PYTHONPATH']}"}
    code, out, err, _ = signalled(env, ("tick", "--as-events"), marker.exists,
                                  "the handlers' import")
    events = [json.loads(line) for line in (out + err).splitlines() if line.startswith("{")]
    failed = [e for e in events if e.get("event") == "tick_failed"]
    assert code == 1, (out, err)
    assert [e.get("error") for e in failed] == ["terminated"], (out, err)
