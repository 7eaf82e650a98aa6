"""SPEC §24, §4.3: `awc migrate` carries a database at the schema before the
claim's cursor (0011) over to it with every job kept in its state: a RUNNING
job's claim token still fences, ready jobs are claimed in order by the new
claim, and a job put back to PENDING after the upgrade is stamped and found.
"""

from __future__ import annotations

import time

import pytest

from tests.support import at_version
from tick.db import connect
from tick.engine.cursor import Cursor
from tick.migrate import migrate, shipped
from tick.queue import ClaimRequest, Writes, round_trip
from tick.statements import sql

BEFORE = 11  # the last migration before 0012_claim_cursor


def test_migrate_keeps_every_job_in_its_state_and_fencing(empty_db_url: str) -> None:
    with connect(empty_db_url) as conn:
        at_version(conn, BEFORE)
        rows = conn.execute("""
            INSERT INTO awc.jobs (kind, state, priority, run_at, attempts, claim_token,
                                  locked_by, locked_until, finished_at)
            VALUES ('noop', 'PENDING', 0, now() - interval '1 minute', 0, NULL, NULL, NULL, NULL),
                   ('noop', 'PENDING', 3, now() - interval '1 minute', 0, NULL, NULL, NULL, NULL),
                   ('noop', 'PENDING', 0, now() + interval '1 hour', 0, NULL, NULL, NULL, NULL),
                   ('noop', 'RUNNING', 0, now(), 1, gen_random_uuid(), 'w-1',
                    now() + interval '5 minutes', NULL),
                   ('noop', 'COMPLETED', 0, now(), 1, NULL, NULL, NULL, now()),
                   ('noop', 'FAILED', 0, now(), 5, NULL, NULL, NULL, now()),
                   ('noop', 'CANCELLED', 0, now(), 0, NULL, NULL, NULL, now())
            RETURNING id, state, claim_token::text""").fetchall()
        before = conn.execute("SELECT id, state, attempts, claim_token, run_at, finished_at "
                              "FROM awc.jobs ORDER BY id").fetchall()

        result = migrate(conn)
        assert 12 in result.applied
        after = conn.execute("SELECT id, state, attempts, claim_token, run_at, finished_at "
                             "FROM awc.jobs ORDER BY id").fetchall()
        assert after == before  # every job kept, in its state

        # The RUNNING job's token still fences: a stranger's write is refused,
        # its own lands.
        running_id, _, token = rows[3]
        refused = conn.execute(sql("complete_jobs"), {
            "ids": [running_id], "tokens": ["00000000-0000-0000-0000-000000000000"],
            "results": [None]}).fetchall()
        assert refused == []
        landed = conn.execute(sql("complete_jobs"), {
            "ids": [running_id], "tokens": [token], "results": [None]}).fetchall()
        assert landed == [(running_id, "COMPLETED")]

        # The ready jobs, enqueued before the upgrade, in claim order.
        cursor = Cursor()
        request = ClaimRequest(slots=["a", "b", "c"], lease_secs=60.0, cap_secs=60.0,
                               leases_json="{}", kinds=None, queues=None,
                               cursor=cursor.params(time.monotonic()))
        done = round_trip(conn, Writes(), request)
        cursor.moved(done.mark, time.monotonic())
        assert [r.id for r in done.claimed] == [rows[1][0], rows[0][0]]  # priority first

        # A dead letter an operator retries after the upgrade sorts behind the
        # cursor (its old run_at) and is found by its stamp.
        dead = rows[5][0]
        conn.execute("UPDATE awc.jobs SET state = 'PENDING', attempts = 0, finished_at = NULL "
                     "WHERE id = %s", (dead,))
        stamped = conn.execute("SELECT ready_xid IS NOT NULL FROM awc.jobs WHERE id = %s",
                               (dead,)).fetchone()
        assert stamped == (True,)
        request = ClaimRequest(slots=["d"], lease_secs=60.0, cap_secs=60.0, leases_json="{}",
                               kinds=None, queues=None, cursor=cursor.params(time.monotonic()))
        assert [r.id for r in round_trip(conn, Writes(), request).claimed] == [dead]


def test_an_older_awc_refuses_the_migrated_schema(empty_db_url: str) -> None:
    """A mixed fleet during the upgrade: an awc that does not ship 0012
    refuses to start on a database that has it (docs/decisions/0027)."""
    from tick.errors import MigrationError
    from tick.migrate import _verify

    with connect(empty_db_url) as conn:
        migrate(conn)
        applied = dict(conn.execute(
            "SELECT version, checksum FROM awc.schema_migrations").fetchall())
    older = [m for m in shipped() if m.version <= BEFORE]
    with pytest.raises(MigrationError, match="newer than this awc"):
        _verify(applied, older)
