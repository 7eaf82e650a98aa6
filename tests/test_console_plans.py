"""EXPLAIN guards for the console (SPEC §19): on a table of realistic size,
every filter of the job list and every overview count reads by index, never
a sequential scan of awc.jobs, and the job list reads at most its window
whatever the filter matches; with custom plans and with the generic plans
prepared statements settle on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.support import migrated_database, nodes, seq_scanned
from tick.statements import sql
from tick.ui.actions import BULK_CAP
from tick.ui.reads import CAP, GROUPS, NAMES, PAGE, WINDOW

pytestmark = pytest.mark.timeout(300)

ROWS = 200_000


@pytest.fixture(scope="module")
def big(server_url: str, template_db: str) -> Iterator[str]:
    """200,000 jobs: mostly finished, a few of each other state; 20 kinds."""
    with migrated_database(server_url, template_db) as url, \
            psycopg.connect(url, autocommit=True) as conn:
        conn.execute("""
            INSERT INTO awc.jobs (kind, queue, state, attempts, run_at, locked_until,
                                  claim_token, finished_at)
            SELECT 'k' || (n %% 20), 'q' || (n %% 5),
                   CASE WHEN n %% 100 < 90 THEN 'COMPLETED' WHEN n %% 100 < 95 THEN 'PENDING'
                        WHEN n %% 100 < 98 THEN 'FAILED' WHEN n %% 100 < 99 THEN 'CANCELLED'
                        ELSE 'RUNNING' END,
                   1, now() - interval '1 hour',
                   CASE WHEN n %% 100 = 99 THEN now() + interval '1 hour' END,
                   CASE WHEN n %% 100 = 99 THEN gen_random_uuid() END,
                   CASE WHEN n %% 100 < 90 OR n %% 100 BETWEEN 95 AND 98 THEN now() END
            FROM generate_series(1, %s) AS n""", (ROWS,))
        conn.execute("VACUUM ANALYZE awc.jobs")
        yield url


def explain(url: str, name: str, params: dict[str, Any], *, generic: bool) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET jit = off")  # as the console's connections run (operator_session)
        if generic:
            conn.execute("SET plan_cache_mode = force_generic_plan")
        row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql(name), params).fetchone()
    assert row is not None
    return json.dumps(row[0])


def rows_read_from_jobs(text: str) -> int:
    """Rows the plan's scans of awc.jobs examined (returned or filtered
    out), over all their loops."""
    return sum((int(n.get("Actual Rows", 0)) + int(n.get("Rows Removed by Filter", 0)))
               * int(n.get("Actual Loops", 1))
               for n in nodes(text) if n.get("Relation Name") == "jobs")


FILTERS = [
    {},
    {"state": "PENDING"}, {"state": "RUNNING"}, {"state": "COMPLETED"},
    {"kind": "k7"}, {"queue": "q2"}, {"kind": "no-such-kind"},
    {"state": "PENDING", "kind": "k3"}, {"state": "COMPLETED", "queue": "q1"},
    # The payload search (SPEC §22): one that matches nothing, one that
    # matches every job, and one beside another filter.
    {"payload": '{"customer": 42}'}, {"payload": "{}"},
    {"kind": "k7", "payload": '{"customer": 42}'},
]


@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
@pytest.mark.parametrize("newer", [False, True], ids=["older", "newer"])
@pytest.mark.parametrize("where", FILTERS,
                         ids=lambda w: "&".join(f"{k}={v}" for k, v in w.items()) or "all")
def test_every_job_list_filter_reads_at_most_its_window(big: str, where: dict[str, str],
                                                        newer: bool, generic: bool) -> None:
    """Either way (Older: below `before`; Newer: above `after`), and with a
    payload search, which reads the payload of the window's rows by id."""
    params = {"state": None, "kind": None, "queue": None, "payload": None, **where,
              "before": ROWS // 2, "after": ROWS // 2, "newer": newer, "window": WINDOW,
              "limit": PAGE + 1}
    text = explain(big, "console_jobs", params, generic=generic)
    assert not seq_scanned(text, "jobs"), text
    # The window and the rows shown: never the table.
    assert rows_read_from_jobs(text) <= 3 * WINDOW + PAGE + 1, rows_read_from_jobs(text)


@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
@pytest.mark.parametrize("newer", [False, True], ids=["older", "newer"])
@pytest.mark.parametrize("state", ["FAILED", "CANCELLED"])
def test_dead_letters_and_cancelled_jobs_list_from_their_index(big: str, state: str,
                                                               newer: bool,
                                                               generic: bool) -> None:
    params = {"state": state, "kind": None, "queue": None, "payload": None,
              "before": 2**63 - 1, "after": 0, "newer": newer, "limit": PAGE + 1}
    text = explain(big, "console_dead_jobs", params, generic=generic)
    found = [(n["Node Type"], n.get("Index Name")) for n in nodes(text)
             if n.get("Relation Name") == "jobs"]
    assert found and all(index == "jobs_dead_idx" for _, index in found), found
    assert rows_read_from_jobs(text) == PAGE + 1


@pytest.mark.parametrize("name, params", [
    ("console_state_counts", {"cap": CAP + 1}),
    ("console_jobs_by_kind", {"cap": CAP + 1, "groups": GROUPS}),
    ("console_jobs_by_queue", {"cap": CAP + 1, "groups": GROUPS}),
    ("console_dead_letters", {"limit": 10}),
    ("console_bulk_candidates", {"states": ["FAILED", "CANCELLED"], "kind": "k1",
                                 "queue": None, "cap": BULK_CAP, "older_secs": None}),
    ("console_bulk_candidates", {"states": ["PENDING", "RUNNING"], "kind": None,
                                 "queue": "q1", "cap": BULK_CAP, "older_secs": None}),
    # SPEC §22: discard's COMPLETED branch reads the finished index, older
    # than a week a range of it.
    ("console_bulk_candidates", {"states": ["FAILED", "CANCELLED", "COMPLETED"],
                                 "kind": None, "queue": None, "cap": BULK_CAP,
                                 "older_secs": 7 * 86400.0}),
    ("console_job_listed", {"id": 1234, "state": None, "kind": None, "queue": None}),
    ("console_job", {"id": 1234, "chars": 100_001}),
    ("console_dead_count", {"state": "FAILED", "kind": "k1", "queue": None,
                            "payload": '{"customer": 42}', "cap": CAP}),
    ("console_job_names", {"cap": CAP, "groups": NAMES}),
])
@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_the_overview_and_actions_read_a_bounded_part_of_the_jobs_table(
        big: str, name: str, params: dict[str, Any], generic: bool) -> None:
    """Each capped count stops at its cap (a sequential scan under a LIMIT,
    chosen when the state is most of the table, stops there too); the rest
    read what they show. The bounds depend on the caps, never on the table."""
    text = explain(big, name, params, generic=generic)
    bound = {"console_state_counts": 5 * (CAP + 1) + PAGE,
             # PENDING per group, the skip, and CAP of each other state
             # (plus the CANCELLED rows the finished index holds beside them).
             "console_jobs_by_kind": GROUPS * (CAP + 1) + 2 * GROUPS + 5 * (CAP + 1),
             "console_jobs_by_queue": GROUPS * (CAP + 1) + 2 * GROUPS + 5 * (CAP + 1),
             "console_bulk_candidates": 3 * BULK_CAP,
             "console_dead_count": CAP, "console_job_names": CAP}.get(name, PAGE)
    examined = rows_read_from_jobs(text)
    assert examined <= bound, (examined, bound, text)
    if name != "console_state_counts":
        assert not seq_scanned(text, "jobs"), text
