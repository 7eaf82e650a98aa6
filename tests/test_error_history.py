"""SPEC §22: why a job failed. Every failed run (a Retry, a Fail, a deadline
cut, an uncaught exception, a lost lease) leaves an entry in
`awc.jobs.errors`, with the handler's own frames where there was an
exception; logs keep a logged exception's traceback; a broken handler
module names its file and line. Real handler modules (tests/failing_kinds.py)
run by `awc tick` processes."""

from __future__ import annotations

import inspect
import json
import os
import pty
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests import failing_kinds, kinds
from tests.support import ROOT, awc_command, job_row, run_awc, spawn, wait_for
from tick.producer import enqueue
from tick.tracebacks import TRACEBACK_LIMIT

SECRET = "s3cr3t-payload-value"


@pytest.fixture
def env(awc_env: dict[str, str]) -> dict[str, str]:
    return {**awc_env, "AWC_HANDLER_MODULES": "tests.kinds,tests.failing_kinds"}


def line_of(fn: Callable[..., Any], text: str) -> int:
    """The line number of the first line of `fn` that contains `text`."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def frame(fn: Callable[..., Any], text: str) -> str:
    return f'File "{inspect.getsourcefile(fn)}", line {line_of(fn, text)}, in {fn.__name__}'


def errors_of(conn: psycopg.Connection[Any], job_id: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = job_row(conn, job_id)["errors"]
    return history


def tick(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = run_awc(env, "tick", *args)
    assert done.returncode == 0, done.stderr
    return done


def test_an_uncaught_exception_records_the_handlers_frames_and_nothing_of_the_engine(
    conn: psycopg.Connection[Any], env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "raises", {"secret": SECRET})
    tick(env)
    job = job_row(conn, job_id)
    assert job["state"] == "PENDING" and job["last_error"].startswith("ValueError: order")
    (entry,) = job["errors"]
    assert set(entry) == {"attempt", "at", "error", "traceback"}
    assert (entry["attempt"], entry["error"]) == (1, job["last_error"])
    trace = entry["traceback"]
    assert trace.startswith("Traceback (most recent call last):\n")
    # The handler's frames, outermost first, each with its source line.
    outer = trace.index(frame(failing_kinds.raises, "parse_order(secret)"))
    inner = trace.index(frame(failing_kinds.parse_order, "raise ValueError"))
    assert outer < inner
    assert "    parse_order(secret)\n" in trace
    assert trace.endswith(job["last_error"] + "\n")
    # Not the engine's frames, no locals, no payload.
    assert "tick/engine" not in trace and "_run_handler" not in trace
    assert SECRET not in trace and SECRET[::-1] not in trace


def test_retry_and_fail_outcomes_are_entries_without_a_traceback(
    conn: psycopg.Connection[Any], env: dict[str, str]
) -> None:
    retried = enqueue(conn, "retry", max_attempts=2)
    failed = enqueue(conn, "fail")
    tick(env)
    conn.execute("UPDATE awc.jobs SET run_at = now() WHERE id = %s", (retried,))
    tick(env)
    history = errors_of(conn, retried)
    assert [(e["attempt"], e["error"]) for e in history] == [
        (1, "Retry: try again later"), (2, "Retry: try again later")]  # oldest first
    assert all("traceback" not in e for e in history)
    assert history[0]["at"] <= history[1]["at"]
    assert job_row(conn, retried)["state"] == "FAILED"
    (entry,) = errors_of(conn, failed)
    assert (entry["attempt"], entry["error"]) == (1, "Fail: cannot ever work")
    assert "traceback" not in entry


def test_a_retry_of_a_caught_exception_records_where_it_was_raised(
    conn: psycopg.Connection[Any], env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "retries_caught")
    tick(env)
    (entry,) = errors_of(conn, job_id)
    assert entry["error"] == "TimeoutError: upstream did not answer in 30 s"
    trace = entry["traceback"]
    assert trace.index(frame(failing_kinds.retries_caught, "call_upstream()")) < trace.index(
        frame(failing_kinds.call_upstream, "raise TimeoutError"))


def test_a_deadline_cut_records_where_the_handler_hung(
    conn: psycopg.Connection[Any], env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "hangs", {"secs": 60})
    done = tick(env, "--max-secs", "5", "--json")
    assert json.loads(done.stdout)["stop_reason"] == "deadline"
    (entry,) = errors_of(conn, job_id)
    assert entry["error"] == "DeadlineExceeded: deadline exceeded"
    trace = entry["traceback"]
    assert trace.startswith("Stack at the deadline (most recent call last):\n")
    # Where it was at the cut: in hang_in_io, called by the handler.
    assert frame(failing_kinds.hangs, "hang_in_io(") in trace
    assert trace.rstrip().endswith(
        frame(failing_kinds.hang_in_io, "time.sleep") + "\n    time.sleep(secs)")
    assert "tick/engine" not in trace and "threading.py" not in trace


def test_a_deadline_cut_in_a_wait_on_the_context_ends_at_the_handlers_call(
    conn: psycopg.Connection[Any], env: dict[str, str]
) -> None:
    """The frames below a call back into awc (`ctx.wait`) are awc's, not the
    handler's: the stack ends at the handler's line that made the call."""
    job_id = enqueue(conn, "patient", {"seconds": 60})
    tick(env, "--max-secs", "5")
    (entry,) = errors_of(conn, job_id)
    assert entry["error"] == "DeadlineExceeded: deadline exceeded"
    # In its wait when the coordinator cut it, or (the wait ends at the
    # deadline too) at the check right after it, whichever came first.
    trace = entry["traceback"].rstrip()
    frames = [line.strip() for line in trace.splitlines() if line.strip().startswith("File ")]
    assert frames[-1] in (frame(kinds.patient, "ctx.wait("), frame(kinds.patient, "ctx.check(")), \
        trace
    assert "tick/engine" not in trace


def test_a_lost_lease_found_by_rescue_is_an_entry(
    conn: psycopg.Connection[Any], env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "noop")
    conn.execute("UPDATE awc.jobs SET state = 'RUNNING', attempts = 1, "
                 "locked_until = now() - interval '1 second', claim_token = gen_random_uuid() "
                 "WHERE id = %s", (job_id,))
    tick(env)  # rescues it, then runs it to completion: the history stays
    assert job_row(conn, job_id)["state"] == "COMPLETED"
    (entry,) = errors_of(conn, job_id)
    assert entry["attempt"] == 1
    assert entry["error"] == "LeaseExpired: lease expired before an outcome was recorded"
    assert "traceback" not in entry


def test_the_history_keeps_the_20_newest_entries(
    conn: psycopg.Connection[Any], env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "fail", max_attempts=30)
    old = [{"attempt": n, "at": "2026-01-01T00:00:00+00:00", "error": f"old {n}"}
           for n in range(1, 21)]
    conn.execute("UPDATE awc.jobs SET errors = %s::jsonb, attempts = 20 WHERE id = %s",
                 (json.dumps(old), job_id))
    tick(env)
    history = errors_of(conn, job_id)
    assert len(history) == 20
    assert history[0]["error"] == "old 2"  # the oldest went
    assert (history[-1]["attempt"], history[-1]["error"]) == (21, "Fail: cannot ever work")


def test_a_traceback_over_8_kb_is_cut_from_the_middle(
    conn: psycopg.Connection[Any], env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "deep", {"depth": 400})
    tick(env)
    trace = errors_of(conn, job_id)[0]["traceback"]
    assert len(trace.encode()) <= TRACEBACK_LIMIT
    assert "the middle cut" in trace
    head, tail = trace.split("the middle cut")
    assert frame(failing_kinds.deep, "recurse(") in head  # where the handler began
    assert tail.endswith("RecursionError: the innermost frame gave up\n")  # where it failed


def test_nul_and_lone_surrogates_in_an_exception_are_recorded_not_refused(
    conn: psycopg.Connection[Any], env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "hostile", max_attempts=1)
    done = tick(env, "--json")
    assert json.loads(done.stdout)["failed"] == 1
    job = job_row(conn, job_id)
    expected = "RuntimeError: badbyte and a lone \\udcff surrogate"
    assert job["last_error"] == expected
    (entry,) = job["errors"]
    assert entry["error"] == expected
    assert entry["traceback"].endswith(expected + "\n")
    assert frame(failing_kinds.hostile, "raise RuntimeError") in entry["traceback"]


def test_jobs_show_prints_the_history_newest_first_with_tracebacks(
    conn: psycopg.Connection[Any], env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "raises", {"secret": SECRET}, max_attempts=2)
    tick(env)
    conn.execute("UPDATE awc.jobs SET run_at = now() WHERE id = %s", (job_id,))
    tick(env)
    shown = run_awc(env, "jobs", "show", str(job_id))
    assert shown.returncode == 0, shown.stderr
    assert len(shown.stdout.splitlines()) == 1  # a pipe gets one line
    history = json.loads(shown.stdout)["errors"]
    assert [e["attempt"] for e in history] == [2, 1]
    lines = history[0]["traceback"]
    assert lines[0] == "Traceback (most recent call last):"
    assert any(frame(failing_kinds.parse_order, "raise ValueError") in line for line in lines)


def test_jobs_show_indents_its_json_on_a_terminal(
    conn: psycopg.Connection[Any], env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "raises", {"secret": SECRET})
    tick(env)
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(awc_command("jobs", "show", str(job_id)), env=env, cwd=ROOT,
                            stdout=secondary, stderr=subprocess.PIPE)
    os.close(secondary)
    out = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # EIO: the other end closed
            break
        if not chunk:
            break
        out += chunk
    os.close(primary)
    assert proc.wait(30) == 0
    text = out.decode().replace("\r\n", "\n")
    shown = json.loads(text)
    assert shown["id"] == job_id
    assert '\n  "errors": [\n' in text
    # Each line of a traceback on a row of its own.
    rows = [row.strip().rstrip(",") for row in text.splitlines()]
    assert json.dumps("  " + frame(failing_kinds.parse_order, "raise ValueError")) in rows


# -- logs --------------------------------------------------------------------------------


def log_events(stderr: str) -> list[dict[str, Any]]:
    return [e for e in (json.loads(line) for line in stderr.splitlines() if line.startswith("{"))
            if e["event"] == "library_log"]


def test_a_handler_logging_an_exception_keeps_its_traceback_in_the_event(
    conn: psycopg.Connection[Any], env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "logs_exception", {"secret": SECRET})
    done = tick(env)
    assert job_row(conn, job_id)["state"] == "COMPLETED"
    (event,) = log_events(done.stderr)
    assert event["logger"] == "tests.failing_kinds" and event["level"] == "error"
    assert event["message"] == "charging failed; will try the other service"
    trace = event["traceback"]
    assert trace.index(frame(failing_kinds.logs_exception, "charge_card(")) < trace.index(
        frame(failing_kinds.charge_card, "raise ConnectionError"))
    assert trace.endswith(f"ConnectionError: the card service hung up after {len(SECRET)} "
                          "bytes\n")
    assert SECRET not in done.stderr


def test_a_logged_traceback_is_bounded(
    conn: psycopg.Connection[Any], env: dict[str, str]
) -> None:
    enqueue(conn, "logs_huge_exception", {"depth": 400})
    done = tick(env)
    (event,) = log_events(done.stderr)
    assert len(event["traceback"].encode()) <= TRACEBACK_LIMIT
    assert "the middle cut" in event["traceback"]


# -- handler modules that fail to import -------------------------------------------------


@pytest.mark.parametrize(("source", "line", "error"), [
    ("import os\n\nVALUE = undefined_name + 1\n", 3, "NameError: name 'undefined_name'"),
    ("def load():\n    return {}['key']\n\n\nTABLE = load()\n", 5, "KeyError: 'key'"),
    ("x = 1\nif x\n    pass\n", 2, "SyntaxError: expected ':'"),
    ("import broken_helper\n", 1, "ZeroDivisionError"),
])
def test_a_handler_module_that_fails_to_import_names_its_file_and_line(
    env: dict[str, str], tmp_path: Path, source: str, line: int, error: str
) -> None:
    (tmp_path / "broken_handlers.py").write_text(source)
    (tmp_path / "broken_helper.py").write_text('"""helper"""\n\nRATIO = 1 / 0\n')
    done = run_awc({**env, "AWC_HANDLER_MODULES": "broken_handlers",
                    "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"}, "tick")
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"awc: AWC_HANDLER_MODULES: cannot import 'broken_handlers': "
                               f"{error}")
    if source.startswith("import broken_helper"):  # the innermost module that failed
        assert lines[0].endswith(f"({tmp_path / 'broken_helper.py'}, line 3)")
    else:
        assert lines[0].endswith(f"({tmp_path / 'broken_handlers.py'}, line {line})")


# -- job events ---------------------------------------------------------------------------


def test_a_released_job_is_logged_as_released_with_its_job_id(
    conn: psycopg.Connection[Any], env: dict[str, str]
) -> None:
    job_id = enqueue(conn, "patient", {"seconds": 60})
    proc = spawn(env, "tick")
    wait_for(lambda: conn.execute("SELECT 1 FROM test_ledger WHERE job_id = %s",
                                  (job_id,)).fetchone(), what="the job to start")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    events = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    (event,) = [e for e in events if e["event"] == f"job_{job_id}"]
    assert (event["job_id"], event["outcome"], event["level"]) == (job_id, "released", "info")
    job = job_row(conn, job_id)
    assert (job["state"], job["errors"]) == ("PENDING", [])  # a release is no failed run


# -- the traceback text itself ------------------------------------------------------------


def test_a_cut_traceback_stays_valid_utf8_without_nul_or_surrogates() -> None:
    from tick.tracebacks import bounded

    text = "é" * 10_000 + "\x00" + "\udcff"
    out = bounded(text)
    assert len(out.encode("utf-8")) <= TRACEBACK_LIMIT
    assert out.startswith("é") and out.endswith("é\\udcff") and "\x00" not in out


def test_a_cycle_of_causes_is_shown_once() -> None:
    from tick.tracebacks import exception_traceback

    first, second = ValueError("first"), KeyError("second")
    first.__context__, second.__context__ = second, first
    trace = exception_traceback(first)
    assert trace.count("ValueError: first") == 1 and trace.count("KeyError: 'second'") == 1


@pytest.mark.parametrize("odd", ["fifo", "/dev/zero"])
def test_a_source_file_that_is_not_a_regular_file_is_never_read(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], tmp_path: Path, odd: str,
) -> None:
    # A frame's source line was read from whatever its file name named: a
    # FIFO blocked the open for ever (at a deadline the coordinator reads
    # the handler's stack: the tick never returned, nor heeded SIGTERM), and
    # /dev/zero was read until memory ran out. Such a frame has no source line.
    import os

    source = str(tmp_path / "fifo") if odd == "fifo" else odd
    if odd == "fifo":
        os.mkfifo(source)
    env = {**awc_env, "AWC_HANDLER_MODULES": "tests.odd_source_kinds",
           "AWC_TEST_ODD_SOURCE": source}
    cut = enqueue(conn, "odd_source", {"secs": 30})  # still running at the deadline
    raised = enqueue(conn, "odd_source", {"secs": 0})
    done = run_awc(env, "tick", "--max-secs", "3", "--json", timeout=30)
    assert done.returncode == 0, done.stderr[-2000:]
    for job, first, line in ((cut, "Stack at the deadline", 2), (raised, "Traceback", 3)):
        (entry,) = conn.execute("SELECT errors FROM awc.jobs WHERE id = %s", (job,)).fetchone()
        text = entry[-1]["traceback"]
        assert text.startswith(first) and f'File "{source}", line {line}, in run\n' in text, text
        assert "nap(" not in text and "raise RuntimeError" not in text, text


def test_an_exception_whose_message_raises_keyboard_interrupt_is_still_a_retry(
    conn: psycopg.Connection[Any], env: dict[str, str]
) -> None:
    # Reading its message raised KeyboardInterrupt, not an Exception: the run
    # was a Fail named KeyboardInterrupt, with no traceback.
    job_id = enqueue(conn, "interrupting", max_attempts=3)
    done = tick(env, "--json")
    assert json.loads(done.stdout)["retried"] == 1, done.stdout + done.stderr
    job = job_row(conn, job_id)
    assert job["state"] == "PENDING"
    assert job["last_error"] == "Interrupting: (the exception's message could not be read)"
    (entry,) = job["errors"]
    assert frame(failing_kinds.interrupting, "raise Interrupting") in entry["traceback"]


@pytest.mark.parametrize("source", [
    "raise RuntimeError('x' * 300_000)\n",
    "class Loud(Exception):\n    def __str__(self):\n        raise SystemExit(3)\n\n\nraise Loud\n",
], ids=["300-kb-message", "message-raises-systemexit"])
def test_a_handler_module_s_import_error_is_one_short_line(
    env: dict[str, str], tmp_path: Path, source: str
) -> None:
    # The message is the module's to write: 300 KB made a 300 KB awc: line.
    (tmp_path / "loud_handlers.py").write_text(source)
    done = run_awc({**env, "AWC_HANDLER_MODULES": "loud_handlers",
                    "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"}, "tick")
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith("awc: AWC_HANDLER_MODULES: cannot import 'loud_handlers': ")
    assert len(line) < 1000 and "Traceback" not in done.stderr, line[:300]


PASSWORD = "hunter2SECRETPW"
URL = f"postgresql://app:{PASSWORD}@db.internal:5432/queue"


def _quoting_the_url(ctx: Any, payload: dict[str, Any]) -> Any:
    from tick import Fail, Retry

    how = payload["how"]
    if how == "raise":
        raise RuntimeError(f"could not connect to {URL}")
    if how == "cause":
        try:
            raise OSError(f"dsn host=db password={PASSWORD} dbname=queue")
        except OSError as error:
            raise RuntimeError("the upstream failed") from error
    if how == "long":  # the password where the 500-character cut falls
        raise RuntimeError("x" * 470 + f" {URL}")
    if how == "kept":  # a secret awc was handed (a setting's), quoted bare
        raise RuntimeError(f"token {KEPT} refused")
    return (Retry if how == "retry" else Fail)(f"upstream said no: {URL}")


KEPT = "console-token-0123456789"


@pytest.mark.parametrize("how", ["raise", "cause", "long", "kept", "retry", "fail"])
def test_a_handlers_error_is_stored_without_a_password(
    conn: psycopg.Connection[Any], how: str
) -> None:
    """SPEC §3, §22: a handler's exception or Retry/Fail text that quotes a
    connection string (its DATABASE_URL, a DSN's password=) or a secret awc
    was handed is recorded with `***` in `last_error`, in each error-history
    entry and in its traceback; it was stored, and shown by `awc jobs show`,
    as written."""
    from tests.support import registry_with
    from tick import tick as run_tick
    from tick.redaction import keep_secret

    keep_secret(KEPT)
    job_id = enqueue(conn, "quotes", {"how": how})
    run_tick(conn, registry=registry_with(quotes=_quoting_the_url), max_secs=30)
    row = job_row(conn, job_id)
    stored = json.dumps([row["last_error"], row["errors"]])
    assert row["errors"] and row["last_error"]
    assert PASSWORD not in stored and PASSWORD[:8] not in stored
    assert KEPT not in stored
    assert "***" in stored


def test_a_traceback_cut_through_a_password_keeps_none_of_it() -> None:
    """The middle cut of a long traceback landed inside a URL: redacted after
    the cut, the fragment held no `@` and kept part of the password."""
    from tick.tracebacks import bounded

    for head in range(3900, 4200, 7):
        text = "a" * head + f" {URL} " + "b" * 8200
        shown = bounded(text)
        assert len(shown.encode()) <= TRACEBACK_LIMIT
        assert PASSWORD[:4] not in shown, head
    # One-character passwords replaced by `***` stay within the limit.
    many = " ".join(f"postgresql://u:{n % 10}@h/db" for n in range(2000))
    assert len(bounded(many).encode()) <= TRACEBACK_LIMIT
