"""How the console shows values (SPEC §19): relative times read as words an
operator would say. Pure functions, no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tick.ui.render import ago


@pytest.mark.parametrize("offset", [timedelta(0), timedelta(milliseconds=300),
                                    timedelta(milliseconds=-300)])
def test_an_instant_within_half_a_second_reads_now_alone(offset: timedelta) -> None:
    shown = str(ago(datetime.now(UTC) - offset))
    assert ">now</time>" in shown
    assert "now ago" not in shown and "in now" not in shown


@pytest.mark.parametrize("offset, label", [(timedelta(minutes=3, seconds=5), "3 min ago"),
                                           (timedelta(hours=-2, seconds=-30), "in 2 h"),
                                           (timedelta(seconds=1), "1 s ago")])
def test_other_instants_say_ago_or_in(offset: timedelta, label: str) -> None:
    assert f">{label}</time>" in str(ago(datetime.now(UTC) - offset))
