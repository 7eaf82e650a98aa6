"""SPEC §5, §6, §9: the engine's pure outcome rules, as tables
(tick/engine/outcomes.py): a return value's statement and detail, the label
of what was recorded, and the report field, event level and metric label
derived from that one vocabulary."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import nested
from tick.engine.outcomes import (
    Complete,
    Continue,
    Fail,
    Retry,
    label_of,
    lost_label,
    outcome_of,
)
from tick.report import TickReport
from tick.words import LABELS, LEVEL, REPORT_FIELD, Record


@pytest.mark.parametrize(
    ("value", "record", "detail"),
    [
        (None, Record.COMPLETE, None),
        (Complete(), Record.COMPLETE, None),
        ({"a": 1}, Record.COMPLETE, '{"a":1}'),
        (Complete([1, "é"]), Record.COMPLETE, '[1,"é"]'),
        (3, Record.COMPLETE, "3"),
        (Retry("later"), Record.RETRY, "Retry: later"),
        (Retry(TimeoutError("slow")), Record.RETRY, "TimeoutError: slow"),
        (Fail("never"), Record.FAIL, "Fail: never"),
        (Fail("x" * 600), Record.FAIL, "Fail: " + "x" * 500),
        (Fail("a\x00b"), Record.FAIL, "Fail: ab"),
        ({"n": float("inf")}, Record.FAIL, "ValueError: result holds NaN or an infinite"),
        ({"s": "\udc80"}, Record.FAIL, "ValueError: result contains a lone surrogate"),
        ({"s": "\x00"}, Record.FAIL, "ValueError: result contains a NUL"),
        ({"s": "\\u0000"}, Record.COMPLETE, '{"s":"\\\\u0000"}'),
        (object(), Record.FAIL, "ValueError: result is not JSON: Object of type object"),
        ({"deep": nested(5000)}, Record.FAIL, "ValueError: result is nested too deeply"),
        (Continue(), Record.CONTINUE, None),
        (Continue({"next": 3}, delay_secs=5), Record.CONTINUE, '{"next":3}'),
        (Continue(None), Record.CONTINUE, None),
        (Continue([float("nan")]), Record.FAIL, "ValueError: Continue state holds NaN"),
        (Continue({"s": "\udc80"}), Record.FAIL, "ValueError: Continue state contains a lone"),
    ],
)
def test_a_return_value_becomes_a_statement_and_a_detail(
    value: Any, record: Record, detail: str | None
) -> None:
    got_record, got_detail = outcome_of(value)
    assert got_record is record
    if detail is None or record is Record.COMPLETE:
        assert got_detail == detail
    else:
        assert got_detail is not None and got_detail.startswith(detail), got_detail


@pytest.mark.parametrize(
    ("record", "state", "label"),
    [
        (Record.COMPLETE, "COMPLETED", "completed"),
        (Record.RETRY, "PENDING", "retried"),
        (Record.RETRY, "FAILED", "failed"),  # a Retry at max_attempts is a dead letter
        (Record.FAIL, "FAILED", "failed"),
        (Record.RELEASE, "PENDING", "released"),  # SPEC §9: named as the report counts it
        (Record.CONTINUE, "PENDING", "continued"),
    ],
)
def test_a_recorded_outcome_is_labelled_by_the_state_it_left(
    record: Record, state: str, label: str
) -> None:
    assert label_of(record, state) == label


@pytest.mark.parametrize(("state", "label"), [("CANCELLED", "cancelled"),
                                               ("PENDING", "discarded"),
                                               ("RUNNING", "discarded"), (None, "discarded")])
def test_an_outcome_the_fence_refused_is_cancelled_or_discarded(
    state: str | None, label: str
) -> None:
    assert lost_label(state) == label


def test_every_label_has_a_report_field_an_event_level_and_is_a_metric_label() -> None:
    assert set(REPORT_FIELD) == set(LEVEL) == set(LABELS)
    assert REPORT_FIELD["released"] == "released" and "other" not in LABELS
    assert set(LEVEL.values()) <= {"info", "warning", "error"}
    report = TickReport()
    for label in LABELS:
        report.count(label)
    counted = report.as_dict()
    assert all(counted[REPORT_FIELD[label]] == 1 for label in LABELS)


@pytest.mark.parametrize("delay", [-1, float("nan"), float("inf"), 400 * 86400, True, "5"])
def test_a_continue_with_a_bad_delay_raises_in_the_handler(delay: Any) -> None:
    with pytest.raises(ValueError, match="delay_secs must be a number of seconds"):
        Continue(delay_secs=delay)


def test_a_continue_state_larger_than_a_checkpoint_s_is_a_fail() -> None:
    # ctx.checkpoint refuses more than a million characters of JSON; a
    # Continue's state of 20 MB was saved, and read back by every claim.
    from tick.engine.outcomes import CHECKPOINT_LIMIT, Continue, outcome_of

    record, detail = outcome_of(Continue(state="x" * (CHECKPOINT_LIMIT + 1)))
    assert record is Record.FAIL and detail is not None
    assert detail.startswith("ValueError: Continue state is 1,000,003 characters of JSON")
    record, detail = outcome_of(Continue(state="x" * (CHECKPOINT_LIMIT - 2)))
    assert record is Record.CONTINUE and detail is not None and len(detail) == CHECKPOINT_LIMIT
