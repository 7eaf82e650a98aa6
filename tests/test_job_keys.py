"""SPEC §23: a job's optional `key` (1 to 200 characters, never `*`), from
`enqueue(..., key=)`, `enqueue_many`, `awc enqueue --key` and plain SQL.
A key the database would refuse is refused by field (on the command line a
usage error naming `--key`, exit 2), and nothing is enqueued.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.support import run_awc
from tick.producer import EnqueueError, enqueue, enqueue_many

HOSTILE = [
    ("", "must not be empty"),
    ("k" * 201, "200"),
    ("a\x00b", "NUL"),
    ("a\ud800b", "surrogate"),
    ("*", "'*'"),
]


def keys(conn: psycopg.Connection[Any]) -> list[str | None]:
    return [row[0] for row in conn.execute("SELECT key FROM awc.jobs ORDER BY id").fetchall()]


def test_every_producer_path_stores_the_key(conn: psycopg.Connection[Any],
                                            awc_env: dict[str, str]) -> None:
    longest = "é" * 200  # characters, not bytes
    enqueue(conn, "noop", key="tenant-1")
    enqueue(conn, "noop", key=longest)
    enqueue(conn, "noop")
    enqueue_many(conn, [{"kind": "noop", "key": "few"}, {"kind": "noop"}])
    # Past the COPY threshold, with and without run_at.
    enqueue_many(conn, [{"kind": "noop", "key": "many\t\\"}] * 70
                 + [{"kind": "noop", "key": "later", "run_at": None}])
    done = run_awc(awc_env, "enqueue", "noop", "--key", "cli")
    assert done.returncode == 0, done.stderr
    conn.execute("INSERT INTO awc.jobs (kind, key) VALUES ('noop', 'sql')")
    assert keys(conn) == (["tenant-1", longest, None, "few", None] + ["many\t\\"] * 70
                          + ["later", "cli", "sql"])


def test_the_copy_path_keeps_a_key_with_a_run_at(conn: psycopg.Connection[Any]) -> None:
    from datetime import UTC, datetime

    at = datetime(2030, 1, 1, tzinfo=UTC)
    enqueue_many(conn, [{"kind": "noop", "key": "t", "run_at": at}] * 70)
    assert keys(conn) == ["t"] * 70


@pytest.mark.parametrize(("key", "why"), HOSTILE)
def test_a_hostile_key_is_refused_by_field_and_nothing_is_enqueued(
    conn: psycopg.Connection[Any], key: str, why: str
) -> None:
    with pytest.raises(EnqueueError, match=r"^key: ") as one:
        enqueue(conn, "noop", key=key)
    assert why in str(one.value)
    with pytest.raises(EnqueueError, match=r"^job 1: key: "):
        enqueue_many(conn, [{"kind": "noop", "key": "fine"}, {"kind": "noop", "key": key}])
    with pytest.raises(EnqueueError, match=r"^job 70: key: "):
        enqueue_many(conn, [{"kind": "noop"}] * 70 + [{"kind": "noop", "key": key}])
    assert conn.execute("SELECT count(*) FROM awc.jobs").fetchone() == (0,)


def test_a_key_that_is_not_text_is_refused(conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(EnqueueError, match=r"^key: "):
        enqueue(conn, "noop", key=7)  # type: ignore[arg-type]


@pytest.mark.parametrize(("key", "why"), [*HOSTILE[:2], ("a\udcffb", "surrogate"), ("*", "")])
def test_a_hostile_key_on_the_command_line_is_one_usage_line(
    conn: psycopg.Connection[Any], awc_env: dict[str, str], key: str, why: str
) -> None:
    done = run_awc(awc_env, "enqueue", "noop", "--key", key)
    assert done.returncode == 2, done.stderr
    assert "--key" in done.stderr and why in done.stderr
    assert "Traceback" not in done.stderr
    # A usage error, as every refused option is: one line naming it.
    assert [line for line in done.stderr.splitlines() if "--key" in line] == [
        line for line in done.stderr.splitlines() if line.startswith("Error: ")]
    assert conn.execute("SELECT count(*) FROM awc.jobs").fetchone() == (0,)


@pytest.mark.parametrize("key", ["", "k" * 201, "*"])
def test_plain_sql_is_held_to_the_same_bounds(conn: psycopg.Connection[Any], key: str) -> None:
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("INSERT INTO awc.jobs (kind, key) VALUES ('noop', %s)", (key,))
