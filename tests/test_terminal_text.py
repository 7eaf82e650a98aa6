"""SPEC §3, §9: producer-controlled text (a kind, a queue, a schedule's or a
limit's name, an error) is escaped wherever awc prints it to a terminal: it
can neither send a terminal sequence (a clipboard write, a title, a cursor
move) nor forge a row of a table."""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest

from tests.support import run_awc
from tick.history import TickStart, record
from tick.limits import Limit, set_limit
from tick.producer import enqueue
from tick.schedules import Schedule, add

# OSC 52 writes the clipboard; CR + LF + a fake row; 8-bit CSI; a
# right-to-left override; a line separator.
EVIL = "ev\x1b]52;c;cm0gLXJmIH4K\x07il\r\nFORGED  COMPLETED  row\x9b2J\u202etxt.exe\u2028"
ACTED_ON = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


@pytest.fixture
def evil_rows(conn: psycopg.Connection[Any]) -> None:
    job = enqueue(conn, EVIL, queue=EVIL)
    conn.execute("UPDATE awc.jobs SET last_error = %s WHERE id = %s",
                 (EVIL, job))
    add(conn, Schedule(EVIL, "@daily", EVIL, {},
                       "UTC", "default", 0, 5, "latest", 3600, "allow"))
    set_limit(conn, Limit("kind", EVIL, 1))
    record(conn, TickStart("tick", "w"), None, error="awc: " + EVIL)


@pytest.mark.parametrize("command", [
    ("jobs", "list"), ("status",), ("schedules", "list"), ("ticks",), ("limits", "list"),
])
def test_producer_text_is_escaped_on_the_terminal(
    evil_rows: None, awc_env: dict[str, str], command: tuple[str, ...]
) -> None:
    done = run_awc(awc_env, *command)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not ACTED_ON.search(done.stdout), repr(done.stdout)
    assert "\\x1b]52;c;" in done.stdout or "\\x1b]52" in done.stdout  # shown, escaped
    assert not any(line.startswith("FORGED") for line in done.stdout.splitlines())


def test_an_error_line_holding_foreign_text_is_escaped() -> None:
    from tick.cli import shown

    line = shown("no schedule named " + EVIL + "\udc80")  # and a lone surrogate
    assert not ACTED_ON.search(line) and "\n" not in line
    assert line.startswith("no schedule named ev\\x1b]52;c;")


def test_indented_json_gives_up_where_indenting_would_multiply_the_text() -> None:
    # `awc jobs show` on a terminal and the console's job page indent JSON
    # for reading; 99 KB of arrays nested 900 deep indented to 90 MB.
    import json

    from tick.text import indented_json

    plain = {"b": [1, {"c": "é"}], "a": None}
    compact = json.dumps(plain)
    assert indented_json(plain, len(compact), sort_keys=True) == json.dumps(
        plain, indent=2, sort_keys=True)
    deep = [json.loads("[" * 900 + "]" * 900) for _ in range(55)]
    text = json.dumps(deep)
    assert len(text) < 100_000
    assert indented_json(deep, len(text)) is None
    deepest: list[Any] = []
    for _ in range(5000):  # deeper than Python encodes
        deepest = [deepest]
    assert indented_json(deepest, 10_000) is None
