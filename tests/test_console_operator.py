"""The console's operator items (SPEC §19, §22), over HTTP: the schedule
list shows the last *scheduled* fire's status; the job list offers the known
kinds and queues, a payload search, a capped match count and a Newer link;
the Ticks page shows released, rescued and continued."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.support import (
    migrated_database,
    signed_in,
)
from tick.producer import enqueue, enqueue_many


@pytest.fixture(scope="module")
def db_url(server_url: str, template_db: str) -> Iterator[str]:
    """One database for the module, so its tests share one console
    (tests/conftest.py: `console`); each test starts it empty."""
    with migrated_database(server_url, template_db) as url:
        yield url


def _ids(page: str) -> list[int]:
    return [int(i) for i in re.findall(r'<td><a href="/jobs/(\d+)">', page)]


def _link(page: str, rel: str) -> str | None:
    found = re.search(rf'<a href="([^"]+)" rel="{rel}">', page)
    return html.unescape(found.group(1)) if found else None


def test_the_schedule_list_shows_a_missed_scheduled_fire_past_a_manual_one(
        conn: psycopg.Connection[Any], console: str) -> None:
    conn.execute("""INSERT INTO awc.schedules (name, cron, timezone, kind, next_fire_at)
                    VALUES ('nightly', '0 3 * * *', 'UTC', 'noop', now() + interval '1 day')""")
    job = enqueue(conn, "noop")
    conn.execute("""INSERT INTO awc.schedule_fires (schedule, fire_at, status, job_id)
                    VALUES ('nightly', now() - interval '2 days', 'enqueued', NULL),
                           ('nightly', now() - interval '1 day', 'missed', NULL),
                           ('nightly', now() - interval '1 hour', 'manual', %s)""", (job,))
    client = signed_in(console)
    page = client.get("/schedules").text
    row = next(r for r in page.split("<tr") if "/schedules/nightly" in r)
    assert ">missed</span>" in row
    assert f"/jobs/{job}" not in row  # the manual trigger is not the last scheduled run


def test_the_ticks_page_shows_released_rescued_and_continued(
        conn: psycopg.Connection[Any], console: str) -> None:
    conn.execute("""INSERT INTO awc.ticks (driver, worker_id, started_at, finished_at,
                        released, rescued, continued, stop_reason)
                    VALUES ('tick', 'w', now(), now(), 71, 82, 93, 'drained')""")
    client = signed_in(console)
    page = client.get("/ticks").text
    for header in ("Released", "Rescued", "Continued"):
        assert f'<th class="num">{header}</th>' in page
    for value in (71, 82, 93):
        assert f'<td class="num">{value}</td>' in page
    # A filter's fixed values take any case, as the CLI's do.
    assert '<td class="num">71</td>' in client.get("/ticks?driver=TICK").text
    assert client.get("/jobs?state=failed").status_code == 200


def test_the_job_filters_offer_the_known_kinds_and_queues(
        conn: psycopg.Connection[Any], console: str) -> None:
    enqueue_many(conn, [{"kind": "mail", "queue": "io"}, {"kind": "resize", "queue": "cpu"}])
    client = signed_in(console)
    page = client.get("/jobs").text
    assert 'list="known-kinds"' in page and 'list="known-queues"' in page
    kinds = re.search(r'<datalist id="known-kinds">(.*?)</datalist>', page)
    queues = re.search(r'<datalist id="known-queues">(.*?)</datalist>', page)
    assert kinds and re.findall(r'value="([^"]+)"', kinds.group(1)) == ["mail", "resize"]
    assert queues and re.findall(r'value="([^"]+)"', queues.group(1)) == ["cpu", "io"]


def test_a_payload_search_lists_the_jobs_whose_payload_contains_it(
        conn: psycopg.Connection[Any], console: str) -> None:
    ids = enqueue_many(conn, [{"kind": "mail", "payload": {"customer": i % 3, "n": i}}
                              for i in range(9)])
    conn.execute("UPDATE awc.jobs SET state = 'FAILED', finished_at = now() "
                 "WHERE id = ANY(%s)", (ids[:6],))
    wanted = [i for n, i in enumerate(ids) if n % 3 == 1]
    client = signed_in(console)
    page = client.get("/jobs", params={"payload": '{"customer": 1}'}).text
    assert sorted(_ids(page)) == wanted
    assert "3 of the 9 jobs searched for this page match" in page
    assert "Retry all matching" not in page  # bulk actions ignore a payload search
    dead = client.get("/jobs", params={"payload": '{"customer": 1}', "state": "failed"}).text
    assert sorted(_ids(dead)) == wanted[:2]
    assert "2 match." in dead
    for bad in ('[1]', '{"a": ', "x" * 2001, '{"a": NaN}', '{"a": "\\u0000"}'):
        answer = client.get("/jobs", params={"payload": bad})
        assert answer.status_code == 400, bad
        assert "payload" in answer.text


@pytest.mark.parametrize("state", [None, "FAILED"])
def test_older_then_newer_returns_to_the_same_page(
        conn: psycopg.Connection[Any], console: str, state: str | None) -> None:
    ids = enqueue_many(conn, [{"kind": "mail"}] * 120)
    if state:
        conn.execute("UPDATE awc.jobs SET state = 'FAILED', finished_at = now()")
    params = {"state": state} if state else {}
    client = signed_in(console)
    first = client.get("/jobs", params=params).text
    assert _link(first, "prev") is None  # the newest page has nothing newer
    second = client.get(_link(first, "next") or "").text
    third = client.get(_link(second, "next") or "").text
    assert _ids(third) == sorted(ids, reverse=True)[100:]
    back = client.get(_link(third, "prev") or "").text
    assert _ids(back) == _ids(second)
    newest = client.get(_link(back, "prev") or "").text
    assert _ids(newest) == _ids(first)
    assert _link(newest, "next") == _link(first, "next")
