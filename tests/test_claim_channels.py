"""SPEC §18, §16, §24 (docs/decisions/0027, 0012, 0028): the statements of
one claim round trip pass values to each other through transaction-local
`awc.*` settings. Every such channel is declared here, once: who writes it,
who reads it, and the order the round trip sends them in. The tests read the
SQL files and `tick/queue.py` as text, so a new reader, writer or a
reordering fails here before it fails in production; and the one rule the
engine repeats in Python (which state a Retry leaves) is held to the SQL.
"""

from __future__ import annotations

import ast
import re
from typing import Any

import psycopg
import pytest

from tests.support import ROOT
from tick.engine.flush import retry_state
from tick.statements import sql

SQL = ROOT / "tick" / "sql"

# channel -> (writers, readers): statement names (tick/sql/<name>.sql).
CHANNELS: dict[str, tuple[set[str], set[str]]] = {
    "awc.held_kinds": ({"claim_limits"}, {"claim_limited_jobs"}),
    "awc.held_queues": ({"claim_limits"}, {"claim_limited_jobs"}),
    "awc.limited_kinds": ({"claim_limits"}, {"claim_limited_jobs", "claim_keyed_jobs",
                                             "claim_dense_jobs", "claim_keyed_gate",
                                             "claim_jobs", "claim_jobs_in_queue"}),
    "awc.limited_queues": ({"claim_limits"}, {"claim_limited_jobs", "claim_keyed_jobs",
                                              "claim_dense_jobs", "claim_keyed_gate",
                                              "claim_jobs", "claim_jobs_in_queue"}),
    "awc.limited_claimed": ({"claim_limited_jobs"}, {"claim_keyed_jobs", "claim_dense_jobs",
                                                     "claim_jobs", "claim_jobs_in_queue"}),
    "awc.walk": ({"claim_limited_jobs"},
                 {"claim_keyed_jobs", "claim_dense_jobs", "claim_keyed_gate", "claim_jobs",
                  "claim_jobs_in_queue"}),
    # SPEC §23 (decision 0034): the fair claim took the slots, or (-1) left them
    # (its gate: 0, a keyed job is ready and the fair claim is sent next;
    # its short form, claim_dense_jobs, as the fair claim)
    "awc.keyed_claimed": ({"claim_keyed_jobs", "claim_dense_jobs", "claim_keyed_gate"},
                          {"claim_jobs", "claim_jobs_in_queue"}),
    # SPEC §23: the per-key limits step 1 holds, and whether any exists
    "awc.held_key_limits": ({"claim_limits"}, {"claim_limited_jobs", "claim_keyed_jobs"}),
    "awc.key_limited": ({"claim_limits"}, {"claim_limited_jobs", "claim_keyed_jobs",
                                           "claim_dense_jobs", "claim_jobs",
                                           "claim_jobs_in_queue"}),
    # SPEC §23: a per-key limit in the fair claim holds jobs back too
    "awc.held_back": ({"claim_limited_jobs", "claim_keyed_jobs"},
                      {"finish_tick", "record_tick"}),
    # SPEC §23: the fair claim too (the engine sends no walk after a fair claim)
    # and the lanes, sent alone while they are the claim (decision 0018)
    "awc.claimed": ({"claim_limited_jobs", "claim_keyed_jobs", "claim_dense_jobs", "claim_jobs",
                     "claim_jobs_in_queue"},
                    {"finish_tick", "record_tick", "open_stretch"}),
    # SPEC §20, not a claim: an operator's retry tells the revived rows'
    # triggers to leave their descendants, which it revives at once after
    # (tick.bulk.revive, decision 0033); read by the schema (below).
    "awc.reviving": ({"revive_jobs", "revive_descendants"}, set()),
}
# Channels read by a function of the schema, not by a statement file.
SCHEMA_READS: dict[str, str] = {"awc.reviving": "awc.settle_children"}
# The order `tick.queue.round_trip` sends them in (the claim is one of the two
# claim_jobs variants; the tail, one of the history statements, goes last).
ORDER = ["claim_limits", "claim_limited_jobs", "claim_keyed_jobs", "claim_jobs", "tail"]
TAILS = {"finish_tick", "record_tick", "open_stretch"}


def step(name: str) -> int:
    if name in TAILS:
        return ORDER.index("tail")
    same = {"claim_jobs_in_queue": "claim_jobs", "claim_keyed_gate": "claim_keyed_jobs",
            "claim_dense_jobs": "claim_keyed_jobs"}
    return ORDER.index(same.get(name, name))


def uses() -> dict[str, tuple[set[str], set[str]]]:
    """Every awc.* setting the SQL files write and read."""
    found: dict[str, tuple[set[str], set[str]]] = {}
    for path in sorted(SQL.glob("*.sql")):
        text = path.read_text(encoding="utf-8")
        for name in re.findall(r"set_config\('(awc\.[a-z_]+)'", text):
            found.setdefault(name, (set(), set()))[0].add(path.stem)
        for name in re.findall(r"current_setting\('(awc\.[a-z_]+)'", text):
            found.setdefault(name, (set(), set()))[1].add(path.stem)
    return found


def test_every_channel_is_declared_with_its_writers_and_readers() -> None:
    assert uses() == CHANNELS


@pytest.mark.parametrize("channel", sorted(CHANNELS))
def test_every_reader_runs_after_a_writer_and_tolerates_it_unset(channel: str) -> None:
    writers, readers = CHANNELS[channel]
    for reader in readers:
        assert min(step(w) for w in writers) < step(reader), (channel, reader)
        text = (SQL / f"{reader}.sql").read_text(encoding="utf-8")
        # missing_ok, and a default when unset (a statement sent on its own).
        for call in re.findall(rf"current_setting\('{re.escape(channel)}'[^)]*\)", text):
            assert call.endswith(", true)"), (reader, call)
        assert re.search(rf"coalesce\(nullif\(current_setting\('{re.escape(channel)}'",
                         text), (reader, channel)


def test_the_round_trip_sends_the_claim_in_the_declared_order() -> None:
    """tick/queue.py's round_trip, read as source: the statements it names,
    in the order it sends them."""
    tree = ast.parse((ROOT / "tick" / "queue.py").read_text(encoding="utf-8"))
    body = next(n for n in ast.walk(tree)
                if isinstance(n, ast.FunctionDef) and n.name == "round_trip")
    calls: list[tuple[int, int, str]] = []  # in source order (a call may sit in an `if`)
    for node in ast.walk(body):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "sql" and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant):
                name = str(arg.value)
            elif isinstance(arg, ast.Name) and arg.id == "name":
                name = "claim_jobs"
            elif isinstance(arg, ast.Name) and arg.id == "keyed":  # or its gate
                name = "claim_keyed_jobs"
            else:
                name = "tail"
            calls.append((node.lineno, node.col_offset, name))
    sent = [name for _, _, name in sorted(calls)]
    claim = [s for s in sent if s in ORDER]
    assert claim == ORDER, sent


@pytest.mark.parametrize(("attempts", "max_attempts"),
                         [(1, 1), (1, 2), (2, 2), (3, 2), (4, 5), (5, 5), (1, 100)])
def test_the_state_a_retry_leaves_is_one_rule_in_python_and_sql(
    conn: psycopg.Connection[Any], attempts: int, max_attempts: int
) -> None:
    """`flush.foreseen` predicts the history row from the state retry_jobs.sql
    leaves; both must say FAILED exactly when attempts are spent."""
    row = conn.execute(
        "INSERT INTO awc.jobs (kind, state, attempts, max_attempts, claim_token, locked_until) "
        "VALUES ('noop', 'RUNNING', %s, %s, gen_random_uuid(), now() + interval '1 minute') "
        "RETURNING id, claim_token::text", (attempts, max_attempts)).fetchone()
    assert row is not None
    got = conn.execute(sql("retry_jobs"), {
        "ids": [row[0]], "tokens": [row[1]], "errors": ["Retry: later"], "delays": [1.0],
        "tracebacks": [None]}).fetchall()
    assert got == [(row[0], retry_state(attempts, max_attempts))]


def test_the_declared_channels_are_the_decision_records() -> None:
    text = "".join((ROOT / "docs" / "decisions" / name).read_text(encoding="utf-8")
                   for name in ("0027-claim-cursor.md", "0030-finished-parts.md",
                                "0033-dependencies-and-an-exact-fan-in.md"))
    for channel in CHANNELS:
        assert f"`{channel}`" in text, channel


def test_the_claim_variants_are_one_statement_but_the_walk() -> None:
    """claim_jobs_in_queue.sql is claim_jobs.sql walking the queue's index:
    with the walk's known differences taken out, the two are the same text,
    so an edit to one is made to both. (The queue's `passed` walk names its
    queue only inside its row bounds: given as an equality too, PostgreSQL
    18 dropped it from them and walked jobs_ready_idx, every queue's jobs
    between the cursors; tests/test_plans.py.)"""
    one = (SQL / "claim_jobs.sql").read_text(encoding="utf-8")
    queue = (SQL / "claim_jobs_in_queue.sql").read_text(encoding="utf-8")
    body = queue[queue.index("WITH limited"):]
    body = re.sub(r"^\s*AND j\.queue = %\(queue\)s\n", "", body, flags=re.M)
    body = body.replace("(j.queue, -j.priority", "(-j.priority")
    body = body.replace("(%(queue)s, ", "(")
    body = body.replace("ORDER BY j.queue, -j.priority", "ORDER BY -j.priority")
    norm = [line.strip() for line in body.splitlines()]
    want = [line.strip() for line in one[one.index("WITH limited"):].splitlines()]
    assert [line for line in norm if line] == [line for line in want if line]


def test_a_channel_the_schema_reads_is_read_by_that_function() -> None:
    schema = (ROOT / "docs" / "schema.sql").read_text(encoding="utf-8")
    for channel, function in SCHEMA_READS.items():
        body = schema[schema.index(f"CREATE FUNCTION {function}("):]
        body = body[:body.index("$$;")]
        assert f"current_setting('{channel}', true)" in body, (channel, function)
