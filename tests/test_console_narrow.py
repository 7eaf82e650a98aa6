"""The console at 760 px (SPEC §19, §22), in a real headless Chromium: no
page scrolls sideways; a table wider than the window scrolls inside itself,
so every column stays reachable. Skips without Debian's chromium, as
tests/test_console_browser.py does."""

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
)

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def narrow(awc_env: dict[str, str]) -> Iterator[tuple[Any, str]]:
    need_browser()
    proc, base = start_console(awc_env)
    read_stderr(proc)
    browser = new_browser()
    try:
        browser.set_window_size(760, 900)
        yield browser, base
    finally:
        browser.quit()
        stop(proc)


def test_every_page_stays_readable_at_760_px(conn: psycopg.Connection[Any],
                                             narrow: tuple[Any, str]) -> None:
    browser, base = narrow
    job = dead_letters(conn, 3)[0]
    conn.execute("UPDATE awc.jobs SET last_error = %s", ("SMTPError: " + "x" * 300,))
    conn.execute("""INSERT INTO awc.ticks (driver, worker_id, started_at, finished_at,
                        stop_reason, error)
                    VALUES ('tick', 'a-rather-long-worker-name-on-host-7', now(), now(),
                            'drained', 'awc: cannot connect to db.internal:5432/awc')""")
    conn.execute("""INSERT INTO awc.schedules (name, cron, timezone, kind, next_fire_at)
                    VALUES ('nightly-report-for-every-customer', '0 3 * * *',
                            'America/Argentina/Buenos_Aires', 'report', now())""")
    sign_in(browser, base)
    assert browser.execute_script("return window.innerWidth") <= 760
    for path in ("/", "/jobs", f"/jobs/{job}", "/schedules", "/ticks", "/limits"):
        browser.get(base + path)
        page, view = browser.execute_script(
            "return [document.documentElement.scrollWidth, window.innerWidth]")
        assert page <= view, (path, page, view)
