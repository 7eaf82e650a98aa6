"""The console over HTTP (SPEC §19): closed by default, CSRF on every
action, read-only mode, bounded and hostile input, actions and their audit
events. A real `awc ui` process against the test's database; the browser
tests are in test_console_browser.py, the plans in test_console_plans.py."""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from tests.support import (
    CONSOLE_TOKEN,
    ROOT,
    csrf_of,
    login_nonce,
    migrated_database,
    read_stderr,
    run_awc,
    signed_in,
    start_console,
    stop,
)
from tick.producer import enqueue

pytestmark = pytest.mark.timeout(120)

PAGES = ["/", "/jobs", "/jobs/1", "/schedules", "/ticks", "/limits", "/jobs/bulk?action=retry"]


@pytest.fixture(scope="module")
def db_url(server_url: str, template_db: str) -> Iterator[str]:
    """One database for the module, so its tests share one console
    (tests/conftest.py: `console`); each test starts it empty."""
    with migrated_database(server_url, template_db) as url:
        yield url


@pytest.fixture
def own_console(awc_env: dict[str, str], conn: psycopg.Connection[Any]) -> Iterator[str]:
    """A console of the test's own (its sign-in throttle is its own)."""
    proc, base = start_console(awc_env)
    read_stderr(proc)
    yield base
    stop(proc)


def _failed_job(conn: psycopg.Connection[Any], kind: str = "mail", **fields: Any) -> int:
    job = enqueue(conn, kind, {"to": "someone"}, **fields)
    conn.execute("UPDATE awc.jobs SET state = 'FAILED', attempts = max_attempts, "
                 "last_error = 'boom', finished_at = now() WHERE id = %s", (job,))
    return job


def _state(conn: psycopg.Connection[Any], job: int) -> str:
    row = conn.execute("SELECT state FROM awc.jobs WHERE id = %s", (job,)).fetchone()
    assert row is not None
    return str(row[0])


def _audit(conn: psycopg.Connection[Any]) -> list[tuple[str, str, Any]]:
    return [(e, s, d) for e, s, d in conn.execute(
        "SELECT event, subject, detail FROM awc.audit_events WHERE event LIKE 'console.%' "
        "ORDER BY id").fetchall()]


# -- closed by default -------------------------------------------------------------------


@pytest.mark.parametrize("token, why", [(None, "AWC_UI_TOKEN is required"),
                                        ("short", "at least 16 characters")])
def test_the_console_does_not_start_without_a_good_token(
        awc_env: dict[str, str], token: str | None, why: str) -> None:
    env = {**awc_env}
    if token is not None:
        env["AWC_UI_TOKEN"] = token
    done = run_awc(env, "ui", "--port", "0", timeout=30)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("awc: ") and why in lines[0], done.stderr
    if token is not None:
        assert token not in done.stderr


def test_a_port_in_use_is_one_line_and_exit_1(awc_env: dict[str, str], console: str) -> None:
    port = console.rsplit(":", 1)[1]
    done = run_awc({**awc_env, "AWC_UI_TOKEN": CONSOLE_TOKEN}, "ui", "--port", port, timeout=30)
    assert done.returncode == 1
    assert done.stderr.strip().startswith(f"awc: cannot listen on 127.0.0.1:{port}")
    assert "Traceback" not in done.stderr


def test_it_binds_to_loopback_unless_told(console: str) -> None:
    assert console.startswith("http://127.0.0.1:")


def test_the_console_never_migrates(empty_db_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWC_")}
    env.update(DATABASE_URL=empty_db_url, AWC_UI_TOKEN=CONSOLE_TOKEN, PYTHONPATH=str(ROOT))
    done = run_awc(env, "ui", "--port", "0", timeout=30)
    assert done.returncode == 1
    assert done.stderr.strip() == "awc: this database has no awc schema; run `awc migrate` first"
    with psycopg.connect(empty_db_url) as conn:
        row = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'awc'").fetchone()
    assert row == (0,)


def test_a_multipart_body_with_a_file_is_refused_with_a_page(console: str) -> None:
    client = signed_in(console)
    answer = client.post("/jobs/bulk", files={"csrf": ("x.txt", b"abc")})
    assert answer.status_code == 400
    assert "awc:" in answer.text and "Traceback" not in answer.text


def test_unauthenticated_requests_see_no_data(conn: psycopg.Connection[Any], console: str) -> None:
    job = _failed_job(conn, kind="secret-kind-name")
    with httpx.Client(base_url=console, timeout=10) as client:
        for path in [*PAGES, f"/jobs/{job}", "/jobs?state=FAILED"]:
            answer = client.get(path)
            assert answer.status_code == 303, path
            assert answer.headers["location"].startswith("/login")
            assert "secret-kind-name" not in answer.text
        for path in [f"/jobs/{job}/retry", "/jobs/bulk", "/schedules/x/pause", "/logout"]:
            answer = client.post(path, data={"csrf": "anything"})
            assert answer.status_code == 403, path
            assert "secret-kind-name" not in answer.text
        # A cookie the console never issued is no session.
        client.cookies.set("awc_session", "forged")
        assert client.get("/jobs").status_code == 303
    assert _state(conn, job) == "FAILED"


def test_the_token_never_appears_in_a_response_or_cookie(console: str) -> None:
    client = signed_in(console)
    seen = [client.get(path) for path in PAGES]
    for answer in seen:
        assert CONSOLE_TOKEN not in answer.text
        assert all(CONSOLE_TOKEN not in value for value in answer.headers.values())
    assert all(CONSOLE_TOKEN not in c.value for c in client.cookies.jar)
    session = client.cookies.get("awc_session")
    assert session and len(session) >= 32


def test_the_session_cookie_is_httponly_and_strict(console: str) -> None:
    with httpx.Client(base_url=console, timeout=10) as client:
        nonce = login_nonce(client.get("/login").text)
        answer = client.post("/login", data={"token": CONSOLE_TOKEN, "login_nonce": nonce})
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith("awc_session=")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie


def test_a_wrong_token_is_refused_and_guessing_is_throttled(own_console: str) -> None:
    """SPEC §19, §22: wrong tokens from one address are throttled, but the
    right one is never locked out by someone else's wrong ones behind the
    same proxy address."""
    with httpx.Client(base_url=own_console, timeout=10) as client:
        for _ in range(10):
            nonce = login_nonce(client.get("/login").text)
            answer = client.post("/login", data={"token": "x" * 20, "login_nonce": nonce})
            assert answer.status_code == 401
            assert "awc_session" not in answer.headers.get("set-cookie", "")
        nonce = login_nonce(client.get("/login").text)
        answer = client.post("/login", data={"token": "y" * 20, "login_nonce": nonce})
        assert answer.status_code == 429
        assert "awc_session" not in answer.headers.get("set-cookie", "")
    with httpx.Client(base_url=own_console, timeout=10) as colleague:  # same address
        nonce = login_nonce(colleague.get("/login").text)
        answer = colleague.post("/login", data={"token": CONSOLE_TOKEN, "login_nonce": nonce})
        assert answer.status_code == 303
        assert answer.headers["set-cookie"].startswith("awc_session=")
        assert colleague.get("/").status_code == 200


def test_the_sign_in_form_needs_its_nonce(console: str) -> None:
    with httpx.Client(base_url=console, timeout=10) as client:
        client.get("/login")
        answer = client.post("/login", data={"token": CONSOLE_TOKEN, "login_nonce": "forged"})
        assert answer.status_code == 403


def test_sign_in_never_redirects_off_the_console(console: str) -> None:
    with httpx.Client(base_url=console, timeout=10) as client:
        nonce = login_nonce(client.get("/login?next=//evil.example/").text)
        answer = client.post("/login", data={"token": CONSOLE_TOKEN, "login_nonce": nonce,
                                             "next": "https://evil.example/"})
        assert answer.status_code == 303 and answer.headers["location"] == "/"


def test_every_answer_carries_the_security_headers(console: str) -> None:
    client = signed_in(console)
    for answer in [client.get("/"), client.get("/jobs?state=NOPE"), client.get("/login"),
                   client.get("/static/awc.css"), httpx.get(console + "/jobs")]:
        csp = answer.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert "unsafe-inline" not in csp
        assert answer.headers["x-frame-options"] == "DENY"
        assert answer.headers["x-content-type-options"] == "nosniff"


def test_signing_out_ends_the_session(console: str) -> None:
    client = signed_in(console)
    csrf = csrf_of(client.get("/").text)
    assert client.post("/logout", data={"csrf": csrf}).status_code == 303
    assert client.get("/").status_code == 303


# -- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize("path, status, says", [
    ("/jobs?state=DONE", 400, "state must be one of"),
    ("/jobs?before=abc", 400, "before must be a positive whole number"),
    ("/jobs?before=99999999999999999999", 400, "before must be a positive"),
    ("/jobs?id=-1", 400, "id must be a positive"),
    ("/jobs?kind=%00x", 400, "kind contains a NUL character"),
    ("/jobs?queue=" + "q" * 201, 400, "queue is longer than 200 characters"),
    ("/jobs/12345678", 404, "job 12345678 does not exist"),
    ("/jobs/abc", 400, "id must be a positive whole number"),
    ("/jobs/%ED%A0%80", 400, "id must be"),
    ("/ticks?driver=cron", 400, "driver must be one of"),
    ("/ticks?before=yesterday", 400, "not a ticks page cursor"),
    ("/schedules/nope", 404, "no such schedule"),
    ("/schedules/%00", 400, "contains a NUL character"),
    ("/jobs/bulk?action=delete", 400, "action must be retry, cancel or discard"),
    ("/no/such/page", 404, "no such page"),
])
def test_bad_input_gets_a_clear_page_and_a_4xx(console: str, path: str, status: int,
                                               says: str) -> None:
    client = signed_in(console)
    answer = client.get(path)
    assert answer.status_code == status, (path, answer.status_code)
    assert says in answer.text
    assert "Traceback" not in answer.text


def test_an_oversized_body_is_refused(console: str) -> None:
    client = signed_in(console)
    answer = client.post("/jobs/bulk", content=b"a=" + b"x" * 100_000,
                         headers={"content-type": "application/x-www-form-urlencoded"})
    assert answer.status_code == 413


def test_hostile_rows_show_as_text_and_never_break_a_page(
        conn: psycopg.Connection[Any], console: str) -> None:
    deep = "[" * 5000 + "]" * 5000
    job = enqueue(conn, "<script>alert(1)</script>", None, queue="q\u202eevil")
    conn.execute("UPDATE awc.jobs SET payload = %s::jsonb, run_at = 'infinity', "
                 "last_error = repeat('e', 2000000), state = 'FAILED' WHERE id = %s",
                 (deep, job))
    client = signed_in(console)
    for path in ["/", "/jobs", f"/jobs/{job}", "/jobs?state=FAILED"]:
        answer = client.get(path)
        assert answer.status_code == 200, path
        assert "<script>alert(1)</script>" not in answer.text
    page = client.get(f"/jobs/{job}").text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "infinity" in page
    assert len(page) < 400_000  # the megabyte error is cut


# -- CSRF and read-only ------------------------------------------------------------------


def test_a_post_without_its_csrf_token_is_refused_and_changes_nothing(
        conn: psycopg.Connection[Any], console: str) -> None:
    job = _failed_job(conn)
    client = signed_in(console)
    for data in [{}, {"csrf": ""}, {"csrf": "not-the-token"}]:
        answer = client.post(f"/jobs/{job}/retry", data=data)
        assert answer.status_code == 403
        assert "CSRF" in answer.text
    other = signed_in(console)  # another session's token is not this session's
    answer = client.post(f"/jobs/{job}/retry", data={"csrf": csrf_of(other.get("/").text)})
    assert answer.status_code == 403
    assert _state(conn, job) == "FAILED"
    assert _audit(conn) == []


def test_read_only_shows_no_actions_and_refuses_them(
        awc_env: dict[str, str], conn: psycopg.Connection[Any], console: str) -> None:
    job = _failed_job(conn)
    conn.execute("INSERT INTO awc.schedules (name, cron, kind, next_fire_at) "
                 "VALUES ('nightly', '0 3 * * *', 'mail', now() + interval '1 hour')")
    proc, base = start_console(awc_env, read_only=True)
    read_stderr(proc)
    try:
        client = signed_in(base)
        conn.execute("INSERT INTO awc.limits (scope, name, max_running) VALUES ('kind', 'a', 1)")
        for path in [f"/jobs/{job}", "/jobs?state=FAILED", "/schedules", "/schedules/nightly",
                     "/limits"]:
            page = client.get(path).text
            assert "read-only" in page
            for verb in ("Retry", "Cancel", "Discard", "Pause", "Resume", "Trigger"):
                assert f">{verb}</button>" not in page, (path, verb)
            assert "all matching" not in page
        csrf = csrf_of(client.get("/").text)  # sign-out still has its token
        for path in [f"/jobs/{job}/retry", f"/jobs/{job}/discard", "/schedules/nightly/trigger",
                     "/jobs/bulk", "/limits/pause"]:
            assert client.post(path, data={"csrf": csrf, "action": "retry",
                                           "target": "kind:a"}).status_code == 403
        assert client.get("/jobs/bulk?action=retry&state=FAILED").status_code == 403
    finally:
        stop(proc)
    assert _state(conn, job) == "FAILED"
    assert _audit(conn) == []


# -- actions ------------------------------------------------------------------------------


def test_retry_and_cancel_one_job_are_recorded(conn: psycopg.Connection[Any],
                                               console: str) -> None:
    failed = _failed_job(conn)
    pending = enqueue(conn, "mail", None)
    client = signed_in(console)
    csrf = csrf_of(client.get(f"/jobs/{failed}").text)
    assert client.post(f"/jobs/{failed}/retry", data={"csrf": csrf}).status_code == 303
    assert client.post(f"/jobs/{pending}/cancel", data={"csrf": csrf}).status_code == 303
    assert _state(conn, failed) == "PENDING"
    assert _state(conn, pending) == "CANCELLED"
    # A job in a state the action does not apply to: 409, nothing recorded.
    answer = client.post(f"/jobs/{pending}/cancel", data={"csrf": csrf})
    assert answer.status_code == 409 and "only PENDING or RUNNING" in answer.text
    assert _audit(conn) == [("console.retry", f"job:{failed}", None),
                            ("console.cancel", f"job:{pending}", None)]


def test_bulk_retry_previews_a_bounded_count_then_applies_it(
        conn: psycopg.Connection[Any], console: str) -> None:
    mine = [_failed_job(conn, kind="mail") for _ in range(3)]
    other = _failed_job(conn, kind="sms")
    live = enqueue(conn, "mail", None, dedupe_key="k1")
    held = _failed_job(conn, kind="mail")
    conn.execute("UPDATE awc.jobs SET dedupe_key = 'k1' WHERE id = %s", (held,))
    client = signed_in(console)
    preview = client.get("/jobs/bulk?action=retry&kind=mail")
    assert preview.status_code == 200
    touches = re.search(r'id="touches">([\d,]+)<', preview.text)
    assert touches is not None and touches.group(1) == "4"  # the preview counts candidates
    # A preview changes nothing.
    assert all(_state(conn, j) == "FAILED" for j in [*mine, other, held])
    done = client.post("/jobs/bulk", data=_confirmation(preview.text))
    assert done.status_code == 200 and "Retry: 3 jobs retried." in done.text
    assert all(_state(conn, j) == "PENDING" for j in mine)
    assert _state(conn, other) == "FAILED"
    assert _state(conn, held) == "FAILED"  # its dedupe key is live (job `live`)
    assert _state(conn, live) == "PENDING"
    events = _audit(conn)
    assert events == [("console.bulk_retry", "jobs", {"filter": {"kind": "mail"}, "count": 3})]


def _confirmation(preview: str) -> dict[str, str]:
    """The hidden fields of a bulk preview's confirm form, as a browser posts them."""
    form = re.search(r'<form method="post" action="/jobs/bulk">(.*?)</form>', preview, re.S)
    assert form is not None, "the preview has no confirm form"
    return {name: html.unescape(value) for name, value in
            re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', form.group(1))}


def test_a_confirmed_bulk_action_touches_only_the_jobs_its_preview_showed(
        conn: psycopg.Connection[Any], console: str) -> None:
    """SPEC §19: the preview said 3; 500 more matched by the time of the
    click. The confirmation changes nothing and previews the new set; only a
    confirmation of that set applies it."""
    from tick.producer import enqueue_many

    first = [enqueue(conn, "mail", None) for _ in range(3)]
    client = signed_in(console)
    preview = client.get("/jobs/bulk?action=cancel&kind=mail").text
    assert re.search(r'id="touches">3<', preview) and "Confirm: Cancel 3" in preview
    later = enqueue_many(conn, [{"kind": "mail"}] * 500)
    again = client.post("/jobs/bulk", data=_confirmation(preview))
    assert again.status_code == 409
    assert 'id="changed-since"' in again.text and "it showed 3" in again.text
    assert re.search(r'id="touches">503<', again.text) and "Confirm: Cancel 503" in again.text
    assert all(_state(conn, j) == "PENDING" for j in [*first, *later])
    assert _audit(conn) == []
    # The same count but other jobs is another set: previewed again too.
    conn.execute("UPDATE awc.jobs SET state = 'COMPLETED', finished_at = now() WHERE id = %s",
                 (first[0],))
    swapped = enqueue(conn, "mail", None)
    assert client.post("/jobs/bulk", data=_confirmation(again.text)).status_code == 409
    assert _state(conn, swapped) == "PENDING"
    # A confirmation without the preview's seal is refused before any change.
    bare = {k: v for k, v in _confirmation(again.text).items() if k != "seal"}
    refused = client.post("/jobs/bulk", data=bare)
    assert refused.status_code == 400 and "seal" in refused.text
    # Confirming the set the page now shows applies to exactly that set.
    current = client.get("/jobs/bulk?action=cancel&kind=mail").text
    done = client.post("/jobs/bulk", data=_confirmation(current))
    assert done.status_code == 200 and "Cancel: 503 jobs cancelled." in done.text
    assert _audit(conn) == [("console.bulk_cancel", "jobs",
                             {"filter": {"kind": "mail"}, "count": 503})]


def test_bulk_cancel_applies_to_pending_and_running_only(conn: psycopg.Connection[Any],
                                                         console: str) -> None:
    pending = enqueue(conn, "report", None, queue="slow")
    failed = _failed_job(conn, kind="report", queue="slow")
    client = signed_in(console)
    preview = client.get("/jobs/bulk?action=cancel&queue=slow")
    assert re.search(r'id="touches">1<', preview.text)
    done = client.post("/jobs/bulk", data=_confirmation(preview.text))
    assert "Cancel: 1 job cancelled." in done.text
    assert _state(conn, pending) == "CANCELLED"
    assert _state(conn, failed) == "FAILED"


def test_schedule_actions_pause_resume_trigger_are_recorded(
        conn: psycopg.Connection[Any], console: str) -> None:
    conn.execute("INSERT INTO awc.schedules (name, cron, kind, next_fire_at) "
                 "VALUES ('reports/nightly', '0 3 * * *', 'report', now() + interval '1 hour')")
    client = signed_in(console)
    page = client.get("/schedules/reports%2Fnightly")
    assert page.status_code == 200 and ">Pause</button>" in page.text
    csrf = csrf_of(page.text)
    for verb in ("pause", "resume", "trigger"):
        answer = client.post(f"/schedules/reports%2Fnightly/{verb}", data={"csrf": csrf})
        assert answer.status_code == 303, verb
    row = conn.execute("SELECT paused FROM awc.schedules WHERE name = 'reports/nightly'"
                       ).fetchone()
    assert row == (False,)
    fired = conn.execute("SELECT status, job_id FROM awc.schedule_fires "
                         "WHERE schedule = 'reports/nightly'").fetchall()
    assert len(fired) == 1 and fired[0][0] == "manual"
    events = _audit(conn)
    assert [e[:2] for e in events] == [("console.pause", "schedule:reports/nightly"),
                                       ("console.resume", "schedule:reports/nightly"),
                                       ("console.trigger", "schedule:reports/nightly")]
    assert events[2][2] == {"job_id": fired[0][1]}
    # The job page names the fire that made it.
    assert "reports/nightly" in client.get(f"/jobs/{fired[0][1]}").text


# -- what the pages show ------------------------------------------------------------------


def test_the_jobs_list_filters_and_pages_by_keyset(conn: psycopg.Connection[Any],
                                                   console: str) -> None:
    from tick.producer import enqueue_many

    ids = enqueue_many(conn, [{"kind": "a" if n % 2 else "b"} for n in range(130)])
    client = signed_in(console)
    first = client.get("/jobs?kind=a").text
    shown = [int(x) for x in re.findall(r'<td><a href="/jobs/(\d+)">', first)]
    wanted = sorted((i for n, i in enumerate(ids) if n % 2), reverse=True)
    assert shown == wanted[:50]
    older = re.search(r'href="/jobs\?([^"]+)" rel="next"', first)
    assert older is not None and "kind=a" in older.group(1)  # the filter is kept
    second = client.get("/jobs?" + older.group(1).replace("&amp;", "&")).text
    shown2 = [int(x) for x in re.findall(r'<td><a href="/jobs/(\d+)">', second)]
    assert shown2 == wanted[50:65]
    assert 'rel="next"' not in second


def test_the_overview_counts_are_capped(conn: psycopg.Connection[Any], console: str) -> None:
    from tick.producer import enqueue_many

    enqueue_many(conn, [{"kind": "bulk"}] * 10_050)
    page = signed_in(console).get("/").text
    assert 'data-state="PENDING">10,000+<' in page


def _overview_table(page: str, key: str) -> dict[str, dict[str, str]]:
    """The overview's "by kind" or "by queue" table: each row's cells by state."""
    table = re.search(rf'<table class="by-{key}">(.*?)</table>', page, re.S)
    assert table is not None, key
    return {html.unescape(name): dict(re.findall(r'data-state="(\w+)">([^<]*)<', row))
            for name, row in re.findall(rf'<tr data-{key}="([^"]*)">(.*?)</tr>', table.group(1),
                                        re.S)}


def test_the_overview_shows_jobs_by_state_per_kind_and_per_queue(
        conn: psycopg.Connection[Any], console: str) -> None:
    """SPEC §19: a kind or queue whose only jobs are running, failed or
    finished is listed, and a job due in 2030 is scheduled, not ready."""
    running = enqueue(conn, "only-running", None, queue="lane-run")
    conn.execute("UPDATE awc.jobs SET state = 'RUNNING', attempts = 1, "
                 "locked_until = now() + interval '1 minute', claim_token = gen_random_uuid(), "
                 "started_at = now() WHERE id = %s", (running,))
    _failed_job(conn, kind="only-failed", queue="lane-dead")
    later = enqueue(conn, "future", None, queue="lane-later")
    conn.execute("UPDATE awc.jobs SET run_at = '2030-01-01T00:00:00Z' WHERE id = %s", (later,))
    enqueue(conn, "now", None, queue="lane-later")
    done = enqueue(conn, "finished", None, queue="lane-done")
    conn.execute("UPDATE awc.jobs SET state = 'COMPLETED', finished_at = now() WHERE id = %s",
                 (done,))
    page = signed_in(console).get("/").text
    zero = {"READY": "0", "SCHEDULED": "0", "RUNNING": "0", "FAILED": "0", "CANCELLED": "0",
            "COMPLETED": "0"}
    assert _overview_table(page, "kind") == {
        "finished": {**zero, "COMPLETED": "1"},
        "future": {**zero, "SCHEDULED": "1"},
        "now": {**zero, "READY": "1"},
        "only-failed": {**zero, "FAILED": "1"},
        "only-running": {**zero, "RUNNING": "1"},
    }
    assert _overview_table(page, "queue") == {
        "lane-dead": {**zero, "FAILED": "1"},
        "lane-done": {**zero, "COMPLETED": "1"},
        "lane-later": {**zero, "READY": "1", "SCHEDULED": "1"},
        "lane-run": {**zero, "RUNNING": "1"},
    }


def test_the_ticks_page_marks_died_and_failed_ticks(conn: psycopg.Connection[Any],
                                                    console: str) -> None:
    conn.execute("INSERT INTO awc.ticks (driver, worker_id, started_at, deadline_at) "
                 "VALUES ('tick', 'w1', now() - interval '2 hours', "
                 "now() - interval '2 hours' + interval '55 s')")
    conn.execute("INSERT INTO awc.ticks (driver, worker_id, started_at, finished_at, error) "
                 "VALUES ('lambda', 'w2', now() - interval '1 hour', now(), 'database: gone')")
    page = signed_in(console).get("/ticks").text
    assert page.count('class="row-died"') == 1 and ">died<" in page
    assert page.count('class="row-failed"') == 1 and "database: gone" in page


def test_the_ticks_pages_show_instants_python_cannot_hold(conn: psycopg.Connection[Any],
                                                         console: str) -> None:
    """SPEC §4.2, §16, §19: a tick row written by plain SQL with any instant
    PostgreSQL accepts is shown, on the overview and on every page of the
    ticks list (the page after one ends at such an instant starts there)."""
    odd = ("infinity", "20000-01-01 00:00:00+00", "294276-12-31 23:30:00+00",
           "0044-03-15 00:00:00+00 BC", "-infinity")
    conn.execute("INSERT INTO awc.ticks (driver, worker_id, started_at, finished_at) "
                 "SELECT 'tick', 'many', 'infinity', now() FROM generate_series(1, 48)")
    for at in odd:
        conn.execute("INSERT INTO awc.ticks (driver, worker_id, started_at, finished_at, "
                     "deadline_at) VALUES ('tick', %s, %s::timestamptz, %s::timestamptz, "
                     "%s::timestamptz)", (f"odd {at}", at, at, at))
        conn.execute("INSERT INTO awc.ticks (driver, worker_id, started_at) "
                     "VALUES ('lambda', %s, %s::timestamptz)", (f"open {at}", at))
    client = signed_in(console)
    assert client.get("/").status_code == 200
    shown: list[str] = []
    url: str | None = "/ticks?driver=tick"
    while url is not None:
        page = client.get(url)
        assert page.status_code == 200, page.text[:300]
        shown += re.findall(r"<td>odd ([^<]+)</td>", page.text)
        found = re.search(r'href="(/ticks\?[^"]*before=[^"]+)" rel="next"', page.text)
        url = found.group(1).replace("&amp;", "&") if found else None
    assert sorted(shown) == sorted(odd)  # each once, across the pages
    assert client.get("/ticks?driver=lambda").status_code == 200
    assert client.get("/ticks?before=20000-13-01%2000:00:00%2B00/5").status_code == 400


def test_json_is_shown_indented(conn: psycopg.Connection[Any], console: str) -> None:
    job = enqueue(conn, "mail", {"to": "a@example.com", "n": [1, 2]})
    page = signed_in(console).get(f"/jobs/{job}").text
    assert json.dumps({"n": [1, 2], "to": "a@example.com"}, indent=2).replace('"', "&#34;") \
        in page


def test_a_schedule_awc_cannot_fire_shows_its_page_and_refuses_resume_by_name(
        conn: psycopg.Connection[Any], console: str) -> None:
    """SPEC §15: a schedule stored with a host-only zone (`localtime`, from
    before zones were checked) has a page without upcoming fires; Resume
    answers 409 saying what is wrong; Pause still works."""
    conn.execute("INSERT INTO awc.schedules (name, cron, timezone, kind, paused, next_fire_at) "
                 "VALUES ('hostly', '0 3 * * *', 'localtime', 'report', true, now())")
    client = signed_in(console)
    page = client.get("/schedules/hostly")
    assert page.status_code == 200, page.text
    refused = client.post("/schedules/hostly/resume", data={"csrf": csrf_of(page.text)})
    assert refused.status_code == 409 and "cannot fire: its timezone" in refused.text
    paused = client.post("/schedules/hostly/pause", data={"csrf": csrf_of(page.text)})
    assert paused.status_code == 303
    assert conn.execute("SELECT paused FROM awc.schedules WHERE name = 'hostly'"
                        ).fetchone() == (True,)


def test_the_job_page_shows_the_error_history_collapsed_newest_first_and_escaped(
        conn: psycopg.Connection[Any], console: str) -> None:
    # SPEC §22: the console's job page shows the history; a hand-written
    # row (too many entries, hostile text, a stray scalar) never breaks it.
    job = _failed_job(conn)
    entries: list[Any] = [{"attempt": n, "at": "2026-12-01T10:00:00+00:00",
                           "error": f"RuntimeError: run {n}",
                           "traceback": f'  File "h.py", line {n}, in step_{n}\n'
                                        "<script>alert(1)</script>" + "x" * 20_000}
                          for n in range(1, 26)]
    entries.insert(10, 7)
    conn.execute("UPDATE awc.jobs SET errors = %s::jsonb WHERE id = %s",
                 (json.dumps(entries), job))
    page = signed_in(console).get(f"/jobs/{job}").text
    section = page[page.index('<details class="errors">'):page.index("</details>")]
    assert "Error history: 20 failed runs, newest first" in section
    runs = [int(n) for n in re.findall(r"RuntimeError: run (\d+)", section)]
    assert runs == list(range(25, 6, -1)), runs  # the 20 newest, newest first, the scalar too
    assert "in step_25" in section and "in step_5" not in section
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in section
    assert len(page) < 400_000


# -- what the operator does next (SPEC §22) -------------------------------------------


def test_discard_one_job_says_so_and_is_recorded(conn: psycopg.Connection[Any],
                                                 console: str) -> None:
    failed, done = _failed_job(conn), enqueue(conn, "mail", None)
    conn.execute("UPDATE awc.jobs SET state = 'COMPLETED', finished_at = now() WHERE id = %s",
                 (done,))
    live = enqueue(conn, "mail", None)
    client = signed_in(console)
    page = client.get(f"/jobs/{failed}").text
    assert ">Discard</button>" in page
    assert ">Discard</button>" not in client.get(f"/jobs/{live}").text
    answer = client.post(f"/jobs/{failed}/discard", data={"csrf": csrf_of(page)})
    assert answer.status_code == 303
    assert answer.headers["location"] == f"/jobs?did=discard&job={failed}"
    assert f"job {failed} discarded" in client.get(answer.headers["location"]).text
    assert conn.execute("SELECT count(*) FROM awc.jobs WHERE id = %s", (failed,)).fetchone() \
        == (0,)
    assert client.post(f"/jobs/{done}/discard", data={"csrf": csrf_of(page)}).status_code == 303
    # PENDING or RUNNING: refused with why, nothing deleted or recorded.
    refused = client.post(f"/jobs/{live}/discard", data={"csrf": csrf_of(page)})
    assert refused.status_code == 409 and "only FAILED, CANCELLED or COMPLETED" in refused.text
    assert _state(conn, live) == "PENDING"
    assert _audit(conn) == [("console.discard", f"job:{failed}", None),
                            ("console.discard", f"job:{done}", None)]


def test_bulk_discard_touches_only_the_final_jobs_its_preview_sealed(
        conn: psycopg.Connection[Any], console: str) -> None:
    dead = [_failed_job(conn, kind="report") for _ in range(3)]
    live = enqueue(conn, "report", None)
    client = signed_in(console)
    listed = client.get("/jobs?kind=report").text
    assert "/jobs/bulk?kind=report&amp;action=discard" in listed
    preview = client.get("/jobs/bulk?action=discard&kind=report")
    assert re.search(r'id="touches">3<', preview.text)
    late = _failed_job(conn, kind="report")  # matches after the preview: not touched
    stale = client.post("/jobs/bulk", data=_confirmation(preview.text))
    assert stale.status_code == 409 and 'id="changed-since"' in stale.text
    assert all(_state(conn, j) == "FAILED" for j in [*dead, late])
    done = client.post("/jobs/bulk", data=_confirmation(stale.text))
    assert done.status_code == 200 and "Discard: 4 jobs discarded." in done.text
    left = [r[0] for r in conn.execute("SELECT id FROM awc.jobs ORDER BY id").fetchall()]
    assert left == [live]
    assert _audit(conn) == [("console.bulk_discard", "jobs",
                             {"filter": {"kind": "report"}, "count": 4})]
    # A filter whose state discard never applies to: nothing to confirm.
    pending = client.get("/jobs/bulk?action=discard&state=PENDING").text
    assert re.search(r'id="touches">0<', pending) and "Confirm" not in pending


def test_bulk_buttons_appear_only_where_they_can_match(conn: psycopg.Connection[Any],
                                                       console: str) -> None:
    client = signed_in(console)
    for state, shown in [("PENDING", {"Cancel"}), ("RUNNING", {"Cancel"}),
                         ("FAILED", {"Retry", "Discard"}), ("CANCELLED", {"Retry", "Discard"}),
                         ("COMPLETED", {"Discard"})]:
        page = client.get(f"/jobs?state={state}").text
        found = set(re.findall(r">(\w+) all matching…</a>", page))
        assert found == shown, (state, found)
    assert set(re.findall(r">(\w+) all matching…</a>", client.get("/jobs?kind=x").text)) \
        == {"Retry", "Cancel", "Discard"}


def test_cancel_of_a_running_job_asks_first_and_each_action_says_what_it_did(
        conn: psycopg.Connection[Any], console: str) -> None:
    running, pending = enqueue(conn, "mail", None), enqueue(conn, "mail", None)
    conn.execute("UPDATE awc.jobs SET state = 'RUNNING', locked_by = 'w', "
                 "locked_until = now() + interval '1 hour', claim_token = gen_random_uuid() "
                 "WHERE id = %s", (running,))
    client = signed_in(console)
    page = client.get(f"/jobs/{running}").text
    assert re.search(r'action="/jobs/\d+/cancel" class="inline" data-confirm="Job \d+ is '
                     r'running: cancel it\?', page)
    assert "data-confirm" not in client.get(f"/jobs/{pending}").text.split("<main>")[1] \
        .split("</form>")[0]
    answer = client.post(f"/jobs/{pending}/cancel", data={"csrf": csrf_of(page)})
    assert answer.headers["location"] == f"/jobs/{pending}?did=cancel&job={pending}"
    shown = client.get(answer.headers["location"]).text
    assert f'id="notice" role="status">job {pending} cancelled<' in shown
    retried = client.post(f"/jobs/{pending}/retry", data={"csrf": csrf_of(page)})
    assert f"job {pending} retried" in client.get(retried.headers["location"]).text
    # A notice is only ever awc's own words: a forged one says nothing.
    for forged in ("?did=<b>x</b>&job=1", "?did=cancel&job=<b>", "?did=cancel&job=-1"):
        assert 'id="notice"' not in client.get(f"/jobs{forged}").text, forged


def _limit(conn: psycopg.Connection[Any], name: str) -> Any:
    return conn.execute("SELECT max_running, rate, per_secs, paused FROM awc.limits "
                        "WHERE name = %s", (name,)).fetchone()


def test_pause_and_resume_on_the_limits_page_keep_the_limit_and_are_recorded(
        conn: psycopg.Connection[Any], console: str) -> None:
    conn.execute("INSERT INTO awc.limits (scope, name, max_running, rate, per_secs) "
                 "VALUES ('kind', 'mail', 3, 10, 60)")
    client = signed_in(console)
    page = client.get("/limits").text
    csrf = csrf_of(page)
    assert ">Pause</button>" in page
    answer = client.post("/limits/pause", data={"csrf": csrf, "target": "kind:mail"})
    assert answer.status_code == 303
    shown = client.get(answer.headers["location"]).text
    assert "kind mail paused" in shown and ">Resume</button>" in shown
    assert _limit(conn, "mail") == (0, 10, 60, True)
    # Pausing a queue with no limit makes one for the pause; Resume removes it.
    assert client.post("/limits/pause", data={"csrf": csrf, "target": "queue:bulk"}
                       ).status_code == 303
    assert _limit(conn, "bulk") == (0, None, None, True)
    for target in ("kind:mail", "queue:bulk"):
        resumed = client.post("/limits/resume", data={"csrf": csrf, "target": target})
        assert resumed.status_code == 303
        assert f"{target.replace(':', ' ')} resumed" in client.get(resumed.headers["location"]).text
    assert _limit(conn, "mail") == (3, 10, 60, False)
    assert _limit(conn, "bulk") is None
    assert _audit(conn) == [("console.pause_limit", "kind:mail", None),
                            ("console.pause_limit", "queue:bulk", None),
                            ("console.resume_limit", "kind:mail", {"limit": "restored"}),
                            ("console.resume_limit", "queue:bulk", {"limit": "removed"})]
    # Resuming what no pause held, or a bad target: refused, nothing changes.
    refused = client.post("/limits/resume", data={"csrf": csrf, "target": "kind:mail"})
    assert refused.status_code == 409 and "is not paused" in refused.text
    for bad in ("tenant:x", "kind:", "mail", "kind:" + "x" * 300):
        answer = client.post("/limits/pause", data={"csrf": csrf, "target": bad})
        assert answer.status_code == 400, bad
    assert client.post("/limits/stop", data={"csrf": csrf, "target": "kind:mail"}
                       ).status_code == 404
    assert client.post("/limits/pause", data={"target": "kind:mail"}).status_code == 403
    assert _limit(conn, "mail") == (3, 10, 60, False) and len(_audit(conn)) == 4


def test_a_job_page_shows_its_parents_and_children_with_their_states(
        conn: psycopg.Connection[Any], console: str) -> None:
    # SPEC §20: "waiting for N of M parents", N the parents not yet final.
    from tick.producer import enqueue_many

    ids = enqueue_many(conn, [{"kind": "export"}, {"kind": "thumb"}, {"kind": "thumb"},
                              {"kind": "index", "after": ["#0", "#1", "#2"]},
                              {"kind": "email", "after": ["#3"]}])
    conn.execute("UPDATE awc.jobs SET state = 'COMPLETED' WHERE id = %s", (ids[0],))
    client = signed_in(console)
    page = client.get(f"/jobs/{ids[3]}").text
    assert "Waiting for 2 of 3 parents" in page
    for parent in ids[:3]:
        assert f'href="/jobs/{parent}"' in page
    assert "Children" in page and f'href="/jobs/{ids[4]}"' in page
    assert "Parents" not in client.get(f"/jobs/{ids[0]}").text


def test_a_job_page_shows_its_key_isolated_and_its_own_timeout(
        conn: psycopg.Connection[Any], console: str) -> None:
    # SPEC §19, §23: every column, the key too (it was missing); a key is a
    # tenant's text, so a right-to-left override in it stays in its cell.
    from tick.producer import enqueue

    keyed = enqueue(conn, "k", key="\u202eacme", timeout_secs=90)
    plain = enqueue(conn, "k")
    client = signed_in(console)
    page = client.get(f"/jobs/{keyed}").text
    assert "<th>Key</th><td><bdi>\u202eacme</bdi></td>" in page
    assert re.search(r"<th>Timeout</th><td>90(\.0)? s a run</td>", page), page
    assert '<th>Key</th><td><span class="muted">—</span>' in client.get(f"/jobs/{plain}").text


def test_a_job_page_says_what_holds_a_job_whose_count_and_parents_disagree(
        conn: psycopg.Connection[Any], console: str) -> None:
    # A parent deleted by hand: the page said "1 parent, all final" of a
    # job the claim never takes.
    from tick.producer import enqueue

    parent = enqueue(conn, "k")
    child = enqueue(conn, "k", after=[parent])
    conn.execute("DELETE FROM awc.jobs WHERE id = %s", (parent,))
    page = signed_in(console).get(f"/jobs/{child}").text
    assert 'id="held"' in page and "Its own count says it waits for 1 parent," in page
    assert "1 of its parents no longer exist" in page


def test_a_schedule_action_acts_on_its_own_schedule_whatever_its_name(
        conn: psycopg.Connection[Any], console: str) -> None:
    """A browser resolves `..` path segments before it sends: the Pause of
    a schedule named `victim/x/..` posted to /schedules/victim/pause and
    paused another schedule. Names go in a path as one segment, every `/`
    escaped, and `.` and `..` are no names."""
    from urllib.parse import urljoin

    from tick.schedules import Schedule, ScheduleError

    for name in ("victim", "victim/x/.."):
        conn.execute("INSERT INTO awc.schedules (name, cron, kind, next_fire_at) "
                     "VALUES (%s, '0 3 * * *', 'report', now() + interval '1 hour')", (name,))
    client = signed_in(console)
    listing = client.get("/schedules").text
    link = re.search(r'href="(/schedules/victim%2Fx%2F\.\.)"', listing)
    assert link is not None, listing[-3000:]
    page = client.get(link.group(1))
    action = re.search(r'action="([^"]*/pause)"', page.text)
    assert action is not None
    # What a browser sends: the action resolved against the page's address.
    sent = urljoin(f"{console}{link.group(1)}", html.unescape(action.group(1)))
    assert client.post(sent, data={"csrf": csrf_of(page.text)}).status_code == 303
    paused = dict(conn.execute("SELECT name, paused FROM awc.schedules").fetchall())
    assert paused == {"victim": False, "victim/x/..": True}
    for name in (".", ".."):
        with pytest.raises(ScheduleError, match=r"must not be \. or \.\."):
            Schedule(name, "@daily", "report").checked()


def test_pages_stay_bounded_by_a_megabyte_kind_and_queue(
        conn: psycopg.Connection[Any], console: str) -> None:
    """A job of plain SQL with a megabyte kind and queue made the overview
    4 MB and every jobs page 2 MB (the producer writes at most 200
    characters; the table's check only refuses an empty kind)."""
    big = "k" * 1_000_000
    row = conn.execute("INSERT INTO awc.jobs (kind, queue, state, finished_at) "
                       "VALUES (%s, %s, 'FAILED', now()) RETURNING id", (big, big)).fetchone()
    assert row is not None
    client = signed_in(console)
    for path in ("/", "/jobs", f"/jobs/{row[0]}", "/jobs?state=FAILED"):
        page = client.get(path)
        assert page.status_code == 200 and len(page.text) < 60_000, (path, len(page.text))


def test_an_action_the_database_refuses_is_not_a_database_that_did_not_answer(
        conn: psycopg.Connection[Any], console: str) -> None:
    """Triggering a schedule whose kind (plain SQL) is too large for the
    ready jobs' index: the server refused the insert, and the console said
    it had not answered (503)."""
    conn.execute("INSERT INTO awc.schedules (name, cron, kind, next_fire_at) "
                 "VALUES ('big', '0 3 * * *', %s, now() + interval '1 hour')", ("k" * 2_000_000,))
    client = signed_in(console)
    page = client.get("/schedules/big")
    answer = client.post("/schedules/big/trigger", data={"csrf": csrf_of(page.text)})
    assert answer.status_code == 409, answer.text[-500:]
    assert "the database refused it (ProgramLimitExceeded)" in answer.text
