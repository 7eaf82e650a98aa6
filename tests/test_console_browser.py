"""The console in a real headless Chromium (SPEC §19): Debian's `chromium`
and `chromium-driver` driven by Selenium, nothing downloaded at run time.

Without them (a developer machine) these tests say so and skip; in CI
(`CI` set, where .ci/run installs them) a missing browser is a failure.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.support import (
    dead_letters,
    need_browser,
    new_browser,
    read_stderr,
    sign_in,
    start_console,
    stop,
    wait_for,
)
from tick.producer import enqueue_many

pytestmark = pytest.mark.timeout(180)



@pytest.fixture
def browser() -> Iterator[Any]:
    need_browser()
    driver = new_browser()
    yield driver
    driver.quit()


@pytest.fixture
def console(awc_env: dict[str, str]) -> Iterator[str]:
    need_browser()
    proc, base = start_console(awc_env)
    read_stderr(proc)
    yield base
    stop(proc)


def _state_on_page(browser: Any) -> str:
    """The job page's state badge; "" while the page is still loading (a
    node replaced under the lookup: a stale element, or chromedriver's
    inspector error saying so)."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By

    try:
        found = browser.find_elements(By.CSS_SELECTOR, "h1 .badge")
        return str(found[0].text) if found else ""
    except WebDriverException:
        return ""


def test_sign_in_filter_paginate_open_a_dead_letter_and_retry_it(
        conn: psycopg.Connection[Any], console: str, browser: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    ids = dead_letters(conn, 60)
    enqueue_many(conn, [{"kind": "other"}] * 30)
    sign_in(browser, console)
    browser.find_element(By.LINK_TEXT, "Jobs").click()
    Select(browser.find_element(By.NAME, "state")).select_by_value("FAILED")
    browser.find_element(By.NAME, "kind").send_keys("mail")
    browser.find_element(By.CSS_SELECTOR, "form.filters button").click()
    wait_for(lambda: "state=FAILED" in browser.current_url, what="the filtered list")
    rows = browser.find_elements(By.CSS_SELECTOR, "table.jobs tbody tr")
    assert len(rows) == 50
    assert all("FAILED" in row.text for row in rows)
    # The next page keeps the filter and holds the rest.
    browser.find_element(By.CSS_SELECTOR, "a[rel=next]").click()
    wait_for(lambda: "before=" in browser.current_url, what="the second page")
    assert "state=FAILED" in browser.current_url and "kind=mail" in browser.current_url
    rows = browser.find_elements(By.CSS_SELECTOR, "table.jobs tbody tr")
    assert len(rows) == 10
    oldest = min(ids)
    browser.find_element(By.LINK_TEXT, str(oldest)).click()
    wait_for(lambda: browser.current_url.endswith(f"/jobs/{oldest}"), what="the job page")
    assert _state_on_page(browser) == "FAILED"
    assert "SMTPError: 550" in browser.page_source
    browser.find_element(By.XPATH, "//button[text()='Retry']").click()
    wait_for(lambda: _state_on_page(browser) == "PENDING", what="the job to turn PENDING")
    row = conn.execute("SELECT state, attempts FROM awc.jobs WHERE id = %s", (oldest,)).fetchone()
    assert row == ("PENDING", 0)
    audit = conn.execute("SELECT subject FROM awc.audit_events WHERE event = 'console.retry'"
                         ).fetchall()
    assert audit == [(f"job:{oldest}",)]


def test_a_form_without_its_csrf_token_is_refused(
        conn: psycopg.Connection[Any], console: str, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    job = dead_letters(conn, 1)[0]
    sign_in(browser, console)
    browser.get(f"{console}/jobs/{job}")
    browser.execute_script("document.querySelectorAll('input[name=csrf]')"
                           ".forEach(function (e) { e.remove(); });")
    browser.find_element(By.XPATH, "//button[text()='Retry']").click()
    wait_for(lambda: "CSRF" in browser.page_source, what="the refusal page")
    assert "403" in browser.title
    row = conn.execute("SELECT state FROM awc.jobs WHERE id = %s", (job,)).fetchone()
    assert row == ("FAILED",)


def test_read_only_mode_shows_no_actions(conn: psycopg.Connection[Any],
                                         awc_env: dict[str, str], browser: Any) -> None:
    from selenium.webdriver.common.by import By

    job = dead_letters(conn, 1)[0]
    proc, base = start_console(awc_env, read_only=True)
    read_stderr(proc)
    try:
        sign_in(browser, base)
        browser.get(f"{base}/jobs/{job}")
        assert _state_on_page(browser) == "FAILED"
        assert "read-only" in browser.find_element(By.CSS_SELECTOR, "header").text
        labels = [b.text for b in browser.find_elements(By.TAG_NAME, "button")]
        assert not {"Retry", "Cancel", "Pause", "Resume", "Trigger"} & set(labels), labels
        browser.get(f"{base}/jobs?state=FAILED")
        assert "all matching" not in browser.page_source
    finally:
        stop(proc)


def test_unauthenticated_visitors_see_the_sign_in_page_only(
        conn: psycopg.Connection[Any], console: str, browser: Any) -> None:
    dead_letters(conn, 3)
    for path in ("/", "/jobs?state=FAILED", "/ticks", "/limits"):
        browser.get(console + path)
        assert "/login" in browser.current_url
        assert "SMTPError" not in browser.page_source
        assert "Sign in" in browser.title


def test_live_refresh_can_be_paused_and_resumed(console: str, browser: Any) -> None:
    import time

    from selenium.webdriver.common.by import By

    sign_in(browser, console)
    toggle = browser.find_element(By.ID, "refresh-toggle")
    assert toggle.text == "Pause refresh"
    toggle.click()
    assert browser.find_element(By.ID, "refresh-toggle").text == "Resume refresh"
    browser.execute_script("window.awcMarker = 1;")
    time.sleep(6.5)  # longer than the 5 s refresh: a reload would drop the marker
    assert browser.execute_script("return window.awcMarker") == 1
    browser.find_element(By.ID, "refresh-toggle").click()
    wait_for(lambda: browser.execute_script("return window.awcMarker") is None, timeout=12,
             what="the page to reload once refresh resumed")
    assert browser.find_element(By.ID, "refresh-toggle").text == "Pause refresh"


def _notice(browser: Any) -> str:
    """The page's notice, or "" while there is none; read while the page is
    being replaced (the form's redirect), the node may be gone, which
    chromedriver says as a stale element or as an inspector error."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By

    try:
        found = browser.find_elements(By.ID, "notice")
        return str(found[0].text) if found else ""
    except WebDriverException:  # StaleElementReferenceException among them
        return ""


def _alert(browser: Any) -> Any:
    """The page's open dialog, or None while there is none."""
    from selenium.common.exceptions import NoAlertPresentException

    try:
        return browser.switch_to.alert
    except NoAlertPresentException:
        return None


def test_pause_and_resume_a_kind_on_the_limits_page(
        conn: psycopg.Connection[Any], console: str, browser: Any) -> None:
    """SPEC §22: the Limits page pauses a kind it has no limit for yet, says
    so, and Resume removes the limit that existed only for the pause."""
    from selenium.webdriver.common.by import By

    sign_in(browser, console)
    browser.find_element(By.LINK_TEXT, "Limits").click()
    wait_for(lambda: browser.current_url.endswith("/limits"), what="the Limits page")
    browser.find_element(By.CSS_SELECTOR, "#pause-form input[name=target]").send_keys("kind:mail")
    browser.find_element(By.CSS_SELECTOR, "#pause-form button").click()
    wait_for(lambda: _notice(browser) == "kind mail paused", what="the pause's notice")
    assert conn.execute("SELECT max_running, paused FROM awc.limits WHERE name = 'mail'"
                        ).fetchone() == (0, True)
    assert "paused" in browser.find_element(By.CSS_SELECTOR, "table tbody tr").text
    browser.find_element(By.XPATH, "//button[text()='Resume']").click()
    wait_for(lambda: _notice(browser) == "kind mail resumed", what="the resume's notice")
    assert conn.execute("SELECT count(*) FROM awc.limits").fetchone() == (0,)
    events = conn.execute("SELECT event, subject FROM awc.audit_events ORDER BY id").fetchall()
    assert events == [("console.pause_limit", "kind:mail"), ("console.resume_limit", "kind:mail")]


def test_discard_asks_first_then_deletes_the_dead_letter(
        conn: psycopg.Connection[Any], console: str, browser: Any) -> None:
    """SPEC §22: Discard on a dead letter's page asks to confirm; dismissed,
    nothing changes; accepted, the job is gone and the jobs page says so."""
    from selenium.webdriver.common.by import By

    job = dead_letters(conn, 1)[0]
    sign_in(browser, console)
    browser.get(f"{console}/jobs/{job}")
    assert _state_on_page(browser) == "FAILED"
    browser.find_element(By.ID, "discard").click()
    wait_for(lambda: _alert(browser), what="the confirm dialog").dismiss()
    assert conn.execute("SELECT state FROM awc.jobs WHERE id = %s", (job,)).fetchone() \
        == ("FAILED",)
    browser.find_element(By.ID, "discard").click()
    wait_for(lambda: _alert(browser), what="the confirm dialog").accept()
    wait_for(lambda: _notice(browser) == f"job {job} discarded", what="the discard's notice")
    assert conn.execute("SELECT count(*) FROM awc.jobs WHERE id = %s", (job,)).fetchone() == (0,)
    assert conn.execute("SELECT event, subject FROM awc.audit_events").fetchall() \
        == [("console.discard", f"job:{job}")]
