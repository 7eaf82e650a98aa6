"""The shared words (tick/words.py) are the ones the schema allows, and the
report's counters are every count the history row and the tables hold.

The SQL keeps its own literals; these tests read it as text (no database).
"""

from __future__ import annotations

import re
from dataclasses import fields

from tests.support import ROOT
from tick.bulk import ACTION_STATES
from tick.cli_history import TICK_COLUMNS
from tick.report import COUNTER_METRICS, COUNTERS, TickReport
from tick.words import (
    ACTION_DONE,
    DRIVERS,
    FIRE_STATUSES,
    JOB_ACTIONS,
    JOB_STATES,
    KEY_LIMIT_SCOPES,
    LABELS,
    LIMIT_SCOPES,
    REPORT_FIELD,
    STOP_REASONS,
    UNRUN_FIRES,
)

SCHEMA = (ROOT / "docs" / "schema.sql").read_text(encoding="utf-8")


def allowed(constraint: str) -> tuple[str, ...]:
    """The values a `CHECK (... IN (...))` constraint of the schema allows, in order."""
    found = re.search(rf"CONSTRAINT {constraint}\s+CHECK \([^;]*? IN \(([^)]*)\)", SCHEMA)
    assert found, f"{constraint} is not in docs/schema.sql"
    return tuple(re.findall(r"'([^']*)'", found.group(1)))


def test_each_closed_set_is_the_one_the_schema_allows() -> None:
    assert allowed("jobs_state_check") == JOB_STATES
    assert allowed("ticks_driver_check") == DRIVERS
    assert allowed("ticks_stop_reason_check") == STOP_REASONS
    assert allowed("schedule_fires_status_check") == FIRE_STATUSES
    assert allowed("limits_scope_check") == LIMIT_SCOPES + KEY_LIMIT_SCOPES
    assert set(UNRUN_FIRES) <= set(FIRE_STATUSES)


def test_the_statements_name_only_job_states() -> None:
    named = set()
    for path in (ROOT / "tick" / "sql").glob("*.sql"):
        text = path.read_text(encoding="utf-8")
        named |= set(re.findall(r"\bstate\s*(?:=|<>|IN \()\s*'([A-Z]+)'", text))
        for group in re.findall(r"\bstate\s+(?:NOT\s+)?IN\s*\(([^)]*)\)", text):
            named |= set(re.findall(r"'([A-Z]+)'", group))
    assert named, "no state literal found: the pattern no longer matches the SQL"
    assert named <= set(JOB_STATES)


def test_the_counters_are_every_count_of_the_report() -> None:
    counts = [f.name for f in fields(TickReport) if f.type in ("int", int)]
    assert list(COUNTERS) == counts
    assert set(REPORT_FIELD[label] for label in LABELS) <= set(COUNTERS)
    assert dict(COUNTER_METRICS)["continued"] == "TickContinued"


def test_the_history_row_holds_every_counter() -> None:
    table = re.search(r"CREATE TABLE awc\.ticks \((.*?)\n\);", SCHEMA, re.S)
    assert table
    columns = re.findall(r"^\s{4}(\w+)\s+integer", table.group(1), re.M)
    assert tuple(columns) == COUNTERS


def test_awc_ticks_shows_counters_only_by_their_names() -> None:
    shown = [c for c in TICK_COLUMNS if c in COUNTERS]
    assert shown and set(TICK_COLUMNS) - set(COUNTERS) <= {
        "id",
        "driver",
        "worker_id",
        "started_at",
        "finished_at",
        "stop_reason",
        "error",
    }


def test_each_job_action_has_its_states_and_its_word() -> None:
    assert tuple(ACTION_STATES) == JOB_ACTIONS == tuple(ACTION_DONE)
    assert all(set(states) <= set(JOB_STATES) for states in ACTION_STATES.values())
