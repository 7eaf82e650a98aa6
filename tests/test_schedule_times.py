"""SPEC §15: fire times across DST changes, checked against instants computed
without the implementation or its cron library: every local wall minute of a
window is matched against the schedule's minutes and hours; an existing wall
time fires once, at its first occurrence; a wall time the clock skips fires
once, at the first instant after the gap."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tick.schedules.times import ScheduleError, check_cron, check_zone, due_fires, fires

ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Pacific/Chatham",
         "America/Santiago", "Asia/Kolkata"]


@cache
def transitions(zone_name: str, year: int = 2026) -> list[datetime]:
    """UTC instants where the zone's offset changes (hourly scan, then refined)."""
    zone = ZoneInfo(zone_name)
    found = []
    at = datetime(year, 1, 1, tzinfo=UTC)
    while at.year == year:
        nxt = at + timedelta(hours=1)
        if at.astimezone(zone).utcoffset() != nxt.astimezone(zone).utcoffset():
            minute = at
            while minute.astimezone(zone).utcoffset() == at.astimezone(zone).utcoffset():
                minute += timedelta(minutes=1)
            found.append(minute)
        at = nxt
    return found or [datetime(year, 6, 1, tzinfo=UTC)]  # no DST: any day will do


def expected(zone_name: str, minutes: set[int], hours: set[int], start: datetime,
             end: datetime) -> list[datetime]:
    zone = ZoneInfo(zone_name)

    def wall(instant: datetime) -> datetime:
        return instant.astimezone(zone).replace(tzinfo=None)

    out: set[datetime] = set()
    # Every wall minute any instant of the window shows, in order.
    first, last = wall(start) - timedelta(hours=3), wall(end) + timedelta(hours=3)
    w = first.replace(second=0, microsecond=0)
    while w <= last:
        if w.minute in minutes and w.hour in hours:
            real = w.replace(tzinfo=zone, fold=0).astimezone(UTC)
            if wall(real) == w:
                instant = real  # exists: its first occurrence (fold 0)
            else:  # skipped: the first instant whose wall time is past it
                instant = real - timedelta(hours=3)
                while wall(instant) <= w:
                    instant += timedelta(minutes=1)
            if start < instant <= end:
                out.add(instant)
        w += timedelta(minutes=1)
    return sorted(out)


@settings(max_examples=60, deadline=None)
@given(
    zone_name=st.sampled_from(ZONES),
    pick=st.integers(min_value=0, max_value=10),
    shift_hours=st.integers(min_value=-30, max_value=6),
    minutes=st.sets(st.sampled_from([0, 1, 15, 29, 30, 31, 45, 59]), min_size=1, max_size=3),
    hours=st.sets(st.integers(min_value=0, max_value=23), min_size=1, max_size=4),
)
def test_fire_times_across_dst_match_an_independent_count(
    zone_name: str, pick: int, shift_hours: int, minutes: set[int], hours: set[int]
) -> None:
    moments = transitions(zone_name)
    start = moments[pick % len(moments)] + timedelta(hours=shift_hours)
    end = start + timedelta(hours=40)
    cron = (f"{','.join(map(str, sorted(minutes)))} {','.join(map(str, sorted(hours)))} "
            "* * *")
    got = []
    for instant in fires(cron, zone_name, start):
        if instant > end:
            break
        got.append(instant)
    assert got == expected(zone_name, minutes, hours, start, end)


def test_a_skipped_wall_time_fires_once_after_the_gap() -> None:
    # Berlin, 2026-03-29: 02:00 becomes 03:00.
    after = datetime(2026, 3, 28, 22, 0, tzinfo=UTC)
    stream = fires("30 2 * * *", "Europe/Berlin", after)
    got = [next(stream), next(stream)]
    assert got == [datetime(2026, 3, 29, 1, 0, tzinfo=UTC),  # 03:00+02: after the gap
                   datetime(2026, 3, 30, 0, 30, tzinfo=UTC)]


@pytest.mark.parametrize("cron", ["30 2 * * *", "0 * * * *", "*/30 * * * *"])
def test_a_repeated_wall_time_fires_once(cron: str) -> None:
    # Berlin, 2026-10-25: 03:00 becomes 02:00 again; 02:xx comes twice.
    zone = ZoneInfo("Europe/Berlin")
    after = datetime(2026, 10, 24, 22, 0, tzinfo=UTC)
    walls = []
    for instant in fires(cron, "Europe/Berlin", after):
        if instant > after + timedelta(hours=6):
            break
        walls.append(instant.astimezone(zone).replace(tzinfo=None))
    assert len(walls) == len(set(walls))
    assert datetime(2026, 10, 25, 2, 30 if cron.startswith("30") else 0) in walls


def test_a_later_call_inside_the_repeated_hour_does_not_fire_again() -> None:
    # 02:10 in the second pass (UTC 01:10): 02:30 fired in the first pass.
    after = datetime(2026, 10, 25, 1, 10, tzinfo=UTC)
    first = next(fires("30 2 * * *", "Europe/Berlin", after))
    assert first == datetime(2026, 10, 26, 1, 30, tzinfo=UTC)


def test_due_fires_are_bounded_and_say_what_comes_next() -> None:
    since = datetime(2026, 1, 1, tzinfo=UTC)
    found, following = due_fires("* * * * *", "UTC", since, since + timedelta(hours=1), 10)
    assert found == [since + timedelta(minutes=m) for m in range(10)]
    assert following == since + timedelta(minutes=10)
    found, following = due_fires("0 * * * *", "UTC", since, since + timedelta(minutes=5), 10)
    assert found == [since] and following == since + timedelta(hours=1)


@pytest.mark.parametrize("alias", ["@hourly", "@daily", "@weekly", "@monthly", "@yearly"])
def test_aliases_are_accepted(alias: str) -> None:
    assert check_cron(alias) == alias
    assert next(fires(alias, "UTC", datetime(2026, 1, 1, 0, 30, tzinfo=UTC))) is not None


@pytest.mark.parametrize("bad", ["", "* * * *", "61 * * * *", "* * * * * *", "@every5m",
                                 "a b c d e", "*/0 * * * *"])
def test_a_bad_cron_is_named(bad: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        check_cron(bad)
    assert caught.value.field == "cron"


@pytest.mark.parametrize("bad", ["", "Mars/Olympus", "../../etc/passwd", "UTC\x00", "x" * 300])
def test_a_bad_zone_is_named(bad: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        check_zone(bad)
    assert caught.value.field == "timezone"


# -- expressions that never fire, or too rarely for the calendar (SPEC §15) ------------------


@pytest.mark.parametrize("never", ["0 0 31 2 *", "0 0 30 2 *", "0 0 31 4,6,9,11 *",
                                   "0 0 */31 * MON#5", "0 0 */31 * MON#2", "0 0 */15 * SUN#4"])
def test_a_cron_that_never_fires_is_named(never: str) -> None:
    """Such an expression parses (cronsim refuses some of them itself, older
    releases none), but it has no fire time: awc says so, naming the cron
    (a usage error), never "StopIteration"."""
    with pytest.raises(ScheduleError) as caught:
        check_cron(never)
    assert caught.value.field == "cron"
    assert "never fires" in caught.value.reason or "day-of-month" in caught.value.reason


@pytest.mark.parametrize("rare", ["0 0 * 2 MON#5", "0 0 29 2 */7", "0 0 29 2 *"])
def test_a_rare_cron_is_accepted_and_its_fires_end_with_the_calendar(rare: str) -> None:
    """A cron that fires once in decades is valid; its stream of fire times
    ends quietly at the last instant a datetime can hold (year 9999),
    instead of overflowing."""
    assert check_cron(rare) == rare
    start = datetime(9000, 1, 1, tzinfo=UTC)
    for zone in ("UTC", "Pacific/Kiritimati", "Pacific/Pago_Pago"):
        found = list(fires(rare, zone, start))
        assert found and all(f.month == 2 and f.year <= 9999 for f in
                             (i.astimezone(ZoneInfo(zone)) for i in found))
        assert found == sorted(found)


# -- only IANA names are zones (SPEC §15) -------------------------------------------------


@pytest.mark.parametrize("host_only", [
    "localtime", "posixrules", "Factory", "posix/Europe/Berlin", "right/UTC", "right/Europe/Paris",
    "europe/berlin", "EUROPE/BERLIN", "Europe/Berlin/", "/usr/share/zoneinfo/UTC",
    "Europe/../UTC", "zone.tab", "tzdata.zi", " UTC", "UTC ",
])
def test_a_name_only_this_host_resolves_is_not_a_zone(host_only: str) -> None:
    """Fire times must not depend on the host: a file of the host's zoneinfo
    tree that is not an IANA zone (the host's own zone, the POSIX default
    rules, the leap-second `right/` tree, a case-insensitive file system's
    match) is refused, here and so in every command that takes a zone."""
    with pytest.raises(ScheduleError) as caught:
        check_zone(host_only)
    assert caught.value.field == "timezone"
    with pytest.raises(ScheduleError):
        next(fires("0 * * * *", host_only, datetime(2026, 1, 1, tzinfo=UTC)))


@pytest.mark.parametrize("iana", ["UTC", "Etc/UTC", "Europe/Berlin", "Europe/Kyiv",
                                  "America/Argentina/Buenos_Aires", "Etc/GMT+5", "US/Eastern",
                                  "EST5EDT", "America/Ciudad_Juarez"])
def test_iana_names_are_zones(iana: str) -> None:
    assert check_zone(iana).key == iana
