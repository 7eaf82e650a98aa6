"""The schedule firing plan (tick/schedules/firing.plan), a pure rule, as a
table: which of a schedule's due fires are enqueued, skipped, missed or
overlap, and where `next_fire_at` goes. No database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tick.loaders import EARLIEST
from tick.schedules.firing import ENQUEUED_PER_SCHEDULE, PLANNED_PER_SCHEDULE, Due, plan

HOURLY = "0 * * * *"
T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)  # a Monday, on the hour


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def due(
    *,
    now: datetime,
    missed: str = "latest",
    catchup_secs: int = 86400,
    overlap: str = "allow",
    previous: str | None = None,
    cron: str = HOURLY,
    next_fire_at: datetime = T0,
) -> Due:
    return Due(
        name="s",
        cron=cron,
        timezone="UTC",
        missed=missed,
        catchup_secs=catchup_secs,
        overlap=overlap,
        next_fire_at=next_fire_at,
        now=now,
        previous_job_state=previous,
    )


@pytest.mark.parametrize(
    ("case", "rows", "next_at"),
    [
        # One fire due, now exactly at it: enqueued; the next is an hour on.
        (due(now=at(0)), [(at(0), "enqueued")], at(1)),
        # Nothing due yet: no rows, next_fire_at stays.
        (due(now=at(-0.5)), [], at(0)),
        # Three due, `latest`: the newest is enqueued, the older skipped.
        (due(now=at(2.5)), [(at(0), "skipped"), (at(1), "skipped"), (at(2), "enqueued")], at(3)),
        # Three due, `all`: each is enqueued.
        (
            due(now=at(2.5), missed="all"),
            [(at(0), "enqueued"), (at(1), "enqueued"), (at(2), "enqueued")],
            at(3),
        ),
        # Older than the catch-up window: missed, whatever `missed` says.
        (
            due(now=at(2.5), catchup_secs=3600),
            [(at(0), "missed"), (at(1), "missed"), (at(2), "enqueued")],
            at(3),
        ),
        (
            due(now=at(2.5), missed="all", catchup_secs=3600),
            [(at(0), "missed"), (at(1), "missed"), (at(2), "enqueued")],
            at(3),
        ),
        # A catch-up window of 0: only a fire at exactly `now` is in it.
        (due(now=at(1), catchup_secs=0), [(at(0), "missed"), (at(1), "enqueued")], at(2)),
        (due(now=at(1.5), catchup_secs=0), [(at(0), "missed"), (at(1), "missed")], at(2)),
        # overlap=skip with the previous job still live: overlap, not enqueued.
        (due(now=at(0), overlap="skip", previous="PENDING"), [(at(0), "overlap")], at(1)),
        (due(now=at(0), overlap="skip", previous="RUNNING"), [(at(0), "overlap")], at(1)),
        # ... with it finished: enqueued.
        (due(now=at(0), overlap="skip", previous="COMPLETED"), [(at(0), "enqueued")], at(1)),
        (due(now=at(0), overlap="skip", previous=None), [(at(0), "enqueued")], at(1)),
        # overlap=allow ignores the previous job.
        (due(now=at(0), previous="RUNNING"), [(at(0), "enqueued")], at(1)),
        # `all` with overlap=skip: the first enqueued fire's job is live for the rest.
        (
            due(now=at(2.5), missed="all", overlap="skip"),
            [(at(0), "enqueued"), (at(1), "overlap"), (at(2), "overlap")],
            at(3),
        ),
    ],
    ids=[
        "one-due",
        "none-due",
        "latest",
        "all",
        "catchup-latest",
        "catchup-all",
        "catchup-zero-on-time",
        "catchup-zero-late",
        "overlap-pending",
        "overlap-running",
        "overlap-done",
        "overlap-no-previous",
        "allow-running",
        "all-then-overlap",
    ],
)
def test_the_firing_plan(case: Due, rows: list[tuple[datetime, str]], next_at: datetime) -> None:
    result = plan(case)
    assert result.fires == rows
    assert result.next_fire_at == next_at


@pytest.mark.parametrize(
    ("missed", "enqueued", "skipped", "next_at"),
    [
        # `all` enqueues at most ENQUEUED_PER_SCHEDULE a call; the rest wait for
        # the next call, which starts at the first of them.
        ("all", ENQUEUED_PER_SCHEDULE, 0, at(ENQUEUED_PER_SCHEDULE)),
        # `latest` with more due than one call plans: the newest planned is not
        # the newest due, so it is skipped too; the next call goes on from there.
        ("latest", 0, PLANNED_PER_SCHEDULE, at(PLANNED_PER_SCHEDULE)),
    ],
)
def test_one_call_is_bounded(missed: str, enqueued: int, skipped: int, next_at: datetime) -> None:
    result = plan(
        due(now=at(PLANNED_PER_SCHEDULE + 10), missed=missed, catchup_secs=10 * 365 * 86400)
    )
    statuses = [status for _, status in result.fires]
    assert (statuses.count("enqueued"), statuses.count("skipped")) == (enqueued, skipped)
    assert result.next_fire_at == next_at


def test_a_next_fire_before_the_year_1_is_refused() -> None:
    with pytest.raises(OverflowError):
        plan(due(now=at(0), next_fire_at=EARLIEST))
