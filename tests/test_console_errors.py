"""The console's errors (SPEC §3, §19): every error is a clean page with
its status and exactly one JSON event on stderr, never a traceback or a
plain-text line; rows a producer or plain SQL wrote (a parked schedule, an
infinite tick time) never make a page fail. A real `awc ui` process with
`AWC_LOG_FORMAT=json`, its stderr read as it writes."""

from __future__ import annotations

import html
import io
import json
import re
import subprocess
import time
from collections.abc import Iterator
from typing import Any, cast

import httpx
import psycopg
import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from tests.support import (
    csrf_of,
    login_nonce,
    read_stderr,
    signed_in,
    start_console,
    stop,
    wait_for,
)

pytestmark = pytest.mark.timeout(120)


class Console:
    """A console process whose stderr lines are collected as they come."""

    def __init__(self, proc: subprocess.Popen[str], base: str) -> None:
        self.proc = proc
        self.base = base
        self.lines = read_stderr(proc)

    def events(self) -> list[dict[str, Any]]:
        # The first line is `awc ui: serving on …` (start_console read it).
        return [json.loads(line) for line in list(self.lines) if line.startswith("{")]


@pytest.fixture
def console(awc_env: dict[str, str]) -> Iterator[Console]:
    proc, base = start_console({**awc_env, "AWC_LOG_FORMAT": "json"})
    yield Console(proc, base)
    stop(proc)


def _errors(console: Console, count: int) -> list[dict[str, Any]]:
    """The console's `console_error` events, once there are `count` of them."""
    wait_for(lambda: len([e for e in console.events() if e["event"] == "console_error"])
             >= count, timeout=10, what=f"{count} console_error events")
    time.sleep(0.2)  # not synchronisation: room for a wrong extra line to show up
    return [e for e in console.events() if e["event"] == "console_error"]


def _park(conn: psycopg.Connection[Any], name: str, cron: str = "not a cron",
          timezone: str = "UTC") -> None:
    """A schedule written by plain SQL past `add`'s checks, parked by firing
    (next_fire_at NULL: tick/sql/park_schedule.sql)."""
    conn.execute("INSERT INTO awc.schedules (name, cron, timezone, kind, next_fire_at) "
                 "VALUES (%s, %s, %s, 'report', NULL)", (name, cron, timezone))


def test_a_parked_schedule_has_a_page_and_its_actions_answer_409(
        conn: psycopg.Connection[Any], console: Console) -> None:
    _park(conn, "bad-cron")
    _park(conn, "bad-zone", cron="0 3 * * *", timezone="Mars/Olympus")
    client = signed_in(console.base)
    listed = client.get("/schedules")
    assert listed.status_code == 200 and listed.text.count(">parked</span>") == 2
    for name, why in [("bad-cron", "cron"), ("bad-zone", "timezone")]:
        page = client.get(f"/schedules/{name}")
        assert page.status_code == 200, name
        assert ">parked</span>" in page.text and f"its {why}" in page.text
        csrf = csrf_of(page.text)
        # Resume would plan fires from what cannot fire: 409, naming why.
        answer = client.post(f"/schedules/{name}/resume", data={"csrf": csrf})
        assert answer.status_code == 409, name
        assert f"awc: schedule {name!r} cannot fire: its {why}" in html.unescape(answer.text)
        # Pausing it is what on-call wants, and harmless.
        assert client.post(f"/schedules/{name}/pause", data={"csrf": csrf}).status_code == 303
    assert all(not line.startswith("Traceback") for line in console.lines)
    assert {e["status"] for e in _errors(console, 2)} == {409}


def test_tick_rows_with_infinite_times_show_as_text(conn: psycopg.Connection[Any],
                                                    console: Console) -> None:
    conn.execute("INSERT INTO awc.ticks (driver, worker_id, started_at, finished_at) "
                 "VALUES ('tick', 'w1', 'infinity', 'infinity'), "
                 "('loop', 'w2', '-infinity', now())")
    client = signed_in(console.base)
    for path in ["/ticks", "/ticks?driver=loop", "/"]:
        answer = client.get(path)
        assert answer.status_code == 200, path
        assert "infinity" in answer.text, path


def _chunks(size: int) -> Iterator[bytes]:
    yield b"csrf=x&action=retry&kind="
    for _ in range(size // 1000):
        yield b"k" * 1000


def test_an_oversize_chunked_body_is_a_413_page(console: Console) -> None:
    client = signed_in(console.base)
    answer = client.post("/jobs/bulk", content=_chunks(200_000),
                         headers={"content-type": "application/x-www-form-urlencoded"})
    assert answer.status_code == 413
    assert "awc: request body too large" in answer.text
    assert "Traceback" not in answer.text


def _wrong_sign_in(base: str) -> httpx.Response:
    with httpx.Client(base_url=base, timeout=10) as client:
        nonce = login_nonce(client.get("/login").text)
        return client.post("/login", data={"token": "w" * 20, "login_nonce": nonce})


def test_every_console_error_is_one_json_event_and_never_a_traceback(
        console: Console) -> None:
    client = signed_in(console.base)
    asked = [
        (client.get("/no/such/page"), 404),
        (client.get("/jobs?state=DONE"), 400),
        (client.get("/jobs/12345"), 404),
        (client.put("/jobs"), 405),
        (client.post("/jobs/1/retry", data={"csrf": "wrong"}), 403),
        (client.post("/jobs/bulk", content=b"a=" + b"x" * 100_000,
                     headers={"content-type": "application/x-www-form-urlencoded"}), 413),
        (client.post("/jobs/bulk", content=_chunks(200_000),
                     headers={"content-type": "application/x-www-form-urlencoded"}), 413),
        (client.post("/jobs/bulk", files={"csrf": ("x.txt", b"abc")}), 400),
        (client.get("/static/no-such-file.css"), 404),
        (httpx.post(console.base + "/logout"), 403),
        (_wrong_sign_in(console.base), 401),
    ]
    assert [a.status_code for a, _ in asked] == [status for _, status in asked]
    for answer, status in asked:
        if status != 401:  # a failed sign-in answers the sign-in form again
            assert 'class="problem"' in answer.text and "awc: " in answer.text
    events = _errors(console, len(asked))
    assert [(e["status"], e["level"]) for e in events] == [
        (status, "warning") for _, status in asked]
    assert [e["path"] for e in events][:3] == ["/no/such/page", "/jobs", "/jobs/12345"]
    assert all("w" * 20 not in line for line in console.lines)
    # Everything after the listening line is one JSON object per line.
    for line in console.lines:
        assert line.startswith("{") and isinstance(json.loads(line), dict), line


def _guarded(app: Any, stream: io.StringIO) -> tuple[Any, str]:
    """`app` behind the console's Guard, logging to `stream`, and a session id."""
    from tick.events import StreamEvents
    from tick.ui.app import Console, Guard

    console = Console(cast(Any, None), "t" * 20, False, StreamEvents("json", stream))
    if isinstance(app, Starlette):
        app.state.console = console
    return Guard(app, console), console.gate.open()


def _boom(request: Any) -> Any:
    raise RuntimeError("a message quoting a payload: secret-value")


async def _raw_boom(scope: Any, receive: Any, send: Any) -> None:
    raise ValueError("secret-value")


@pytest.mark.parametrize("kind", ["endpoint", "bare app"])
def test_an_unexpected_failure_is_a_500_page_and_one_event_naming_its_class(kind: str) -> None:
    """SPEC §3: whatever fails inside the console, the answer is the error
    page with 500 and the log holds one event with the exception's class,
    never its message (it may quote a payload) or a traceback."""
    import asyncio

    import httpx

    from tick.ui.app import _internal

    stream = io.StringIO()
    if kind == "endpoint":
        app: Any = Starlette(routes=[Route("/boom", _boom)])
        guard, sid = _guarded(app, stream)
        app.add_exception_handler(500, lambda r, e: _internal(app.state.console, r, e))
        error = "RuntimeError"
    else:
        guard, sid = _guarded(_raw_boom, stream)
        error = "ValueError"

    async def ask() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=guard),
                                     base_url="http://console",
                                     cookies={"awc_session": sid}) as client:
            return await client.get("/boom")

    answer = asyncio.run(ask())  # an exception escaping Guard would fail here
    assert answer.status_code == 500
    assert 'class="problem"' in answer.text
    assert "awc: the console could not answer this request" in answer.text
    assert "secret-value" not in answer.text
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1, lines
    event = json.loads(lines[0])
    assert (event["event"], event["level"], event["status"], event["error"], event["path"]) == \
        ("console_error", "error", 500, error, "/boom")
    assert "secret-value" not in lines[0] and "Traceback" not in lines[0]


def test_infinite_instants_in_every_column_never_break_a_page(
        conn: psycopg.Connection[Any], console: Console) -> None:
    """SPEC §19: plain SQL may store `infinity` or `-infinity` in any
    timestamp column; every page shows it as text and keeps its links (the
    ticks page's "Older" cursor included)."""
    stamps = ("run_at", "locked_until", "created_at", "updated_at", "started_at", "finished_at")
    jobs = []
    for state, when in [("FAILED", "infinity"), ("RUNNING", "-infinity"),
                        ("PENDING", "infinity"), ("COMPLETED", "-infinity")]:
        row = conn.execute("INSERT INTO awc.jobs (kind, state, claim_token) "
                           "VALUES ('k', %s, gen_random_uuid()) RETURNING id", (state,)).fetchone()
        assert row is not None
        conn.execute(f"UPDATE awc.jobs SET {', '.join(f'{c} = %s' for c in stamps)} "
                     "WHERE id = %s", (*[when] * len(stamps), row[0]))
        jobs.append(row[0])
    conn.execute("INSERT INTO awc.schedules (name, cron, kind, next_fire_at, last_fire_at, "
                 "created_at, updated_at) VALUES ('far', '0 3 * * *', 'k', 'infinity', "
                 "'-infinity', '-infinity', 'infinity')")
    conn.execute("INSERT INTO awc.schedule_fires (schedule, fire_at, status, job_id, recorded_at) "
                 "VALUES ('far', 'infinity', 'enqueued', %s, '-infinity'), "
                 "('far', '-infinity', 'missed', NULL, 'infinity')", (jobs[0],))
    conn.execute("INSERT INTO awc.ticks (driver, worker_id, started_at, finished_at, deadline_at) "
                 "SELECT 'tick', 'w', 'infinity', "
                 "CASE WHEN n % 2 = 0 THEN '-infinity'::timestamptz END, '-infinity' "
                 "FROM generate_series(1, 60) AS n")
    conn.execute("INSERT INTO awc.limits (scope, name, rate, per_secs) VALUES ('kind', 'k', 5, 60)")
    conn.execute("INSERT INTO awc.limit_claims (scope, name, at) "
                 "VALUES ('kind', 'k', 'infinity'), ('kind', 'k', '-infinity')")
    client = signed_in(console.base)
    paths = ["/", "/jobs", "/jobs?state=FAILED", "/jobs?state=RUNNING", "/jobs?kind=k",
             *[f"/jobs/{j}" for j in jobs], "/schedules", "/schedules/far", "/ticks",
             "/ticks?driver=tick", "/limits"]
    for path in paths:
        answer = client.get(path)
        assert answer.status_code == 200, (path, answer.status_code)
        assert "infinity" in answer.text or path == "/limits", path
    older = re.search(r'href="/ticks\?([^"]+)" rel="next"', client.get("/ticks").text)
    assert older is not None
    second = client.get("/ticks?" + html.unescape(older.group(1)))
    assert second.status_code == 200 and "infinity" in second.text
    assert not [e for e in console.events() if e["event"] == "console_error"]


def test_hostile_error_history_and_deep_json_keep_the_job_page_whole(
        conn: psycopg.Connection[Any], console: Console) -> None:
    """An error history's `at` is plain JSON text: one whose offset takes it
    past the years 1-9999 in UTC made the job page a 500. And arrays nested
    900 deep, 99 KB as stored, were indented into 90 MB of page; such JSON
    is shown as stored."""
    deep = "[" + ",".join("[" * 900 + "]" * 900 for _ in range(55)) + "]"
    errors = json.dumps([{"attempt": 1, "at": at, "error": "E: x"} for at in (
        "9999-12-31T23:00:00-05:00", "0001-01-01T00:00:00+14:00", "2026-01-01T00:00:00Z")])
    row = conn.execute("INSERT INTO awc.jobs (kind, state, payload, result, errors, finished_at) "
                       "VALUES ('k', 'FAILED', %s::jsonb, %s::jsonb, %s::jsonb, now()) "
                       "RETURNING id", (deep, deep, errors)).fetchone()
    assert row is not None
    answer = signed_in(console.base).get(f"/jobs/{row[0]}")
    assert answer.status_code == 200
    assert "9999-12-31T23:00:00-05:00" in answer.text and "0001-01-01T00:00:00+14:00" in answer.text
    assert len(answer.content) < 1_000_000, len(answer.content)
    assert not [e for e in console.events() if e["event"] == "console_error"]
