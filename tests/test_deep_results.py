"""SPEC §20 under hostile rows and arguments: a result nested deeper than Python's JSON
decoder goes (a writer in plain SQL can store one; jsonb takes thousands of
levels) reaches a producer's `wait`, `awc wait` and a child's
`ctx.parents()` as its stored JSON text, never as a RecursionError; and
what `awc wait` prints is printable ASCII, the same JSON value."""

from __future__ import annotations

import json
import sys
from typing import Any

import psycopg
import pytest

from tests.support import registry_with, run_awc
from tick import Complete, JobContext, tick
from tick.producer import enqueue
from tick.text import json_for_terminal
from tick.waiting import wait

pytestmark = pytest.mark.timeout(120)

# Deeper than Python's decoder goes; an odd string at the bottom: a C1
# control (CSI), a bidi override, DEL, an astral character.
BOTTOM = "\u009b31m\u202e\u00e9\U0001F600\x7f"
DEEP = '{"k": ' + "[" * 3000 + json.dumps(BOTTOM) + "]" * 3000 + "}"


def completed_with(conn: psycopg.Connection[Any], result: str) -> int:
    row = conn.execute("INSERT INTO awc.jobs (kind, state, result, finished_at) "
                       "VALUES ('parent', 'COMPLETED', %s::jsonb, now()) RETURNING id",
                       (result,)).fetchone()
    assert row is not None
    return int(row[0])


def decoded(text: str) -> Any:
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)
    try:
        return json.loads(text)
    finally:
        sys.setrecursionlimit(limit)


def bottom(value: Any) -> Any:
    value = value["k"]
    while isinstance(value, list):
        value = value[0]
    return value


def test_wait_gives_a_result_too_deep_to_decode_as_its_stored_text(
        conn: psycopg.Connection[Any]) -> None:
    job = completed_with(conn, DEEP)
    outcome = wait(conn, job, 5)
    assert (outcome.state, outcome.result) == ("COMPLETED", None)
    assert outcome.result_too_deep is not None
    assert bottom(decoded(outcome.result_too_deep)) == BOTTOM
    shallow = wait(conn, completed_with(conn, '{"k": [1]}'), 5)
    assert (shallow.result, shallow.result_too_deep) == ({"k": [1]}, None)


def test_awc_wait_prints_it_as_stored_in_printable_ascii(
        conn: psycopg.Connection[Any], awc_env: dict[str, str]) -> None:
    job = completed_with(conn, DEEP)
    done = run_awc(awc_env, "wait", str(job), "--timeout", "5")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr == ""
    out = done.stdout.strip()
    assert out.isascii() and out.isprintable()
    assert bottom(decoded(out)) == BOTTOM


def test_a_child_reads_such_a_parent_as_its_json_text(conn: psycopg.Connection[Any]) -> None:
    seen: list[Any] = []

    def child(ctx: JobContext, payload: Any) -> Complete:
        seen.extend(ctx.parents())
        return Complete()

    parent = completed_with(conn, DEEP)
    shallow = completed_with(conn, "[1, 2]")
    kid = enqueue(conn, "child", after=[parent, shallow])
    assert tick(conn, registry=registry_with(child=child), max_secs=10).completed == 1
    assert [(p.id, p.state) for p in seen] == [(parent, "COMPLETED"), (shallow, "COMPLETED")]
    assert isinstance(seen[0].result, str) and bottom(decoded(seen[0].result)) == BOTTOM
    assert seen[1].result == [1, 2]
    row = conn.execute("SELECT state FROM awc.jobs WHERE id = %s", (kid,)).fetchone()
    assert row == ("COMPLETED",)


@pytest.mark.parametrize("value", [BOTTOM, "plain", "\x00\x1b[2J\n\t", "\U0010FFFF", "𝄞é"])
def test_json_for_terminal_keeps_the_value_in_printable_ascii(value: str) -> None:
    text = json.dumps({"v": [value]}, ensure_ascii=False)
    shown = json_for_terminal(text)
    assert shown.isascii() and shown.isprintable()
    assert json.loads(shown) == {"v": [value]}


@pytest.mark.parametrize("job_id", [True, "5", 1.5, None])
def test_wait_refuses_a_job_id_that_is_no_int(conn: psycopg.Connection[Any],
                                              job_id: Any) -> None:
    """A clear TypeError before any exchange (True reached the database as
    a boolean and failed there; "5" and 1.5 were looked up)."""
    with pytest.raises(TypeError, match=r"^wait: job_id must be an int"):
        wait(conn, job_id, 0.1)
