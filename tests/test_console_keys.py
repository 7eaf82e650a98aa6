"""SPEC §23 on the console (SPEC §19): the Limits page shows a per-key
limit's busiest keys, bounded, and offers no Pause for a key scope."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.support import migrated_database, signed_in

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def db_url(server_url: str, template_db: str) -> Iterator[str]:
    """One database for the module, so its tests share one console."""
    with migrated_database(server_url, template_db) as url:
        yield url


def test_the_consoles_limits_page_shows_the_busiest_keys_and_no_pause_for_keys(
    conn: psycopg.Connection[Any], console: str,
) -> None:
    conn.execute("INSERT INTO awc.limits (scope, name, max_running) VALUES ('key', '*', 5)")
    conn.execute("INSERT INTO awc.jobs (kind, key, state, attempts, claim_token, locked_until) "
                 "SELECT 'noop', 'k' || (g % 30), 'RUNNING', 1, gen_random_uuid(), "
                 "now() + interval '1 minute' FROM generate_series(0, 59) AS g")
    page = signed_in(console).get("/limits").text
    assert page.count("&nbsp;2") == 20  # the 20 busiest of 30 keys, 2 running each
    assert "<bdi>k0</bdi>&nbsp;2" in page
    assert 'value="key:*"' not in page  # no Pause or Resume for a key scope


def test_the_metrics_show_the_busiest_keys_of_a_per_key_limit(
    conn: psycopg.Connection[Any],
) -> None:
    """`awc_limit_key_running_jobs{scope,name,key}`: at most 20 keys a
    limit; a key no longer among them reads 0."""
    from tick.limits import Limit, set_limit
    from tick.metrics import Metrics

    conn.execute("TRUNCATE awc.jobs, awc.limits, awc.limit_claims CASCADE")  # the module's db
    set_limit(conn, Limit("key", "*", max_running=9))
    conn.execute("INSERT INTO awc.jobs (kind, key, state, attempts, claim_token, locked_until) "
                 "SELECT 'noop', 'k' || (g % 25), 'RUNNING', 1, gen_random_uuid(), "
                 "now() + interval '1 minute' FROM generate_series(0, 29) AS g")
    metrics = Metrics()
    metrics.sample_queue(conn)
    text = metrics.exposition().decode()
    assert text.count("awc_limit_key_running_jobs{") == 20
    assert 'awc_limit_key_running_jobs{key="k0",name="*",scope="key"} 2.0' in text
    conn.execute("UPDATE awc.jobs SET state = 'FAILED', locked_until = NULL, claim_token = NULL "
                 "WHERE key = 'k0'")
    metrics.sample_queue(conn)
    assert 'awc_limit_key_running_jobs{key="k0",name="*",scope="key"} 0.0' \
        in metrics.exposition().decode()


def test_keys_once_busy_leave_the_metrics_and_new_busy_keys_are_named(
    conn: psycopg.Connection[Any],
) -> None:
    """A key that left the busiest reads 0 for one sample, then its series
    goes: kept at 0, every key once busy held one of the 127 label sets, and
    later busy keys showed only as the overflow series."""
    from tick.limits import Limit, set_limit
    from tick.metrics import Metrics

    conn.execute("TRUNCATE awc.jobs, awc.limits, awc.limit_claims CASCADE")  # the module's db
    set_limit(conn, Limit("key", "*", max_running=9))
    metrics = Metrics()
    for wave in range(10):  # 20 new busy keys a wave: 200 in all
        conn.execute("DELETE FROM awc.jobs")
        conn.execute("INSERT INTO awc.jobs (kind, key, state, attempts, claim_token, "
                     "locked_until) SELECT 'noop', %s || g, 'RUNNING', 1, "
                     "gen_random_uuid(), now() + interval '1 minute' "
                     "FROM generate_series(0, 19) AS g", (f"w{wave}-",))
        metrics.sample_queue(conn)
    text = metrics.exposition().decode()
    assert 'awc_limit_key_running_jobs{key="w9-0",name="*",scope="key"} 1.0' in text
    assert 'key="w8-0"' in text and 'key="w7-0"' not in text  # 0 once, then gone
    assert "overflow" not in text.split("awc_limit_key_running_jobs", 1)[1]


def test_the_ready_gauge_counts_every_kind_past_ten_thousand(
        conn: psycopg.Connection[Any]) -> None:
    """The overflow series forgot the oldest of more than 10,000 kinds it
    stood for: 20,000 ready jobs of as many kinds read as 10,128."""
    from prometheus_client import CollectorRegistry

    from tick.metrics import Metrics

    conn.execute("TRUNCATE awc.jobs, awc.limits, awc.limit_claims CASCADE")  # the module's db
    conn.execute("INSERT INTO awc.jobs (kind) SELECT 'k-' || n FROM generate_series(1, 20000) n")
    metrics = Metrics(CollectorRegistry())
    metrics.sample_queue(conn)
    (family,) = [f for f in metrics.registry.collect() if f.name == "awc_queue_ready_jobs"]
    assert sum(s.value for s in family.samples) == 20_000
    conn.execute("TRUNCATE awc.jobs CASCADE")
