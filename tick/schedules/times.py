"""Fire times (SPEC §15): a schedule's cron instants in its IANA time zone.

Pure, no I/O. The cron arithmetic is cronsim's (docs/decisions/0010: it
keeps a fixed wall time once on a DST change, where croniter fires it twice).
One rule is awc's own: a wall time fires at most once. When the clock goes
back, an hour of wall times comes again; cronsim, like cron, would fire an
hour-wildcard schedule (`0 * * * *`) in both passes, and SPEC §15 says a
repeated wall time fires once. A wall time the clock skips fires once, at
the first instant after the gap (cronsim's behaviour, kept).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

from tick.errors import FieldError

ALIASES = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
}
# How far back a clock can have been ahead of now: the largest DST shift is
# two hours (Antarctica/Troll); three leaves room.
_LOOKBACK_MINUTES = 180


class ScheduleError(FieldError):
    """A schedule option awc cannot use, named by `field`; never quotes secrets
    (there are none here, but the message stays short and plain)."""


def check_cron(expression: str) -> str:
    """The expression as stored: 5 fields or one of the @ aliases; a
    `ScheduleError("cron", …)` otherwise."""
    from cronsim import CronSim, CronSimError

    text = " ".join(expression.split()) if isinstance(expression, str) else ""
    if not text:
        raise ScheduleError("cron", "is empty")
    if text.startswith("@"):
        if text not in ALIASES:
            raise ScheduleError("cron", f"unknown alias; use one of {', '.join(ALIASES)}")
        return text
    if len(text) > 200 or len(text.split(" ")) != 5:
        raise ScheduleError("cron", "must have 5 fields (minute hour day month weekday)")
    try:
        sim = CronSim(text, datetime(2000, 1, 1, tzinfo=UTC))
    except (CronSimError, ValueError) as error:
        raise ScheduleError("cron", f"is not a valid expression ({error})") from None
    # An expression can parse and still name no date at all (day 1 and the
    # fifth Monday; day 31 of February with an older cronsim). cronsim then
    # gives up after 50 years with StopIteration. The rarest real schedules
    # (February 29 on a given weekday) fire at least every 40 years, and the
    # calendar repeats every 400, so one search from any start decides.
    try:
        next(sim)
    except StopIteration:
        raise ScheduleError("cron", "never fires: no date matches its day, month and "
                                    "weekday fields") from None
    return text


class HostFault(ScheduleError):
    """This host cannot plan the schedule (its time zone data is missing or
    cannot be read), though the schedule itself may be sound: a tick leaves
    it due rather than park it (SPEC §15)."""


@cache
def iana_names() -> frozenset[str]:
    """Every IANA time zone name (zones and their links), as the `tzdata`
    package lists them: the same list on every host.

    Not what `ZoneInfo` can open, nor `zoneinfo.available_timezones()`:
    those are the files of this host's zoneinfo tree, which also holds
    `localtime` (the host's own zone), `posixrules`, the `posix/` and
    leap-second `right/` copies, and on a case-insensitive file system
    every spelling of a name. A schedule in one of those fires at times
    that depend on the host it is computed on (SPEC §15: IANA names only).
    `Factory` is IANA's placeholder for a host whose zone is not set."""
    from importlib import resources

    try:
        listed = resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8")
    except (ImportError, OSError):
        raise HostFault("timezone", "cannot be checked: the tzdata package, a "
                                    "dependency of awc, is not installed") from None
    return frozenset(listed.split()) - {"Factory"}


def check_zone(name: str) -> ZoneInfo:
    """The IANA zone `name`; a `ScheduleError("timezone", …)` otherwise."""
    from zoneinfo import ZoneInfoNotFoundError

    if not isinstance(name, str) or name not in iana_names():
        raise ScheduleError("timezone", "is not an IANA time zone name (such as UTC or "
                                        "Europe/Berlin)")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise HostFault("timezone", "is an IANA name this host has no data for "
                                    "(install the tzdata package)") from None


def _wall(instant: datetime, zone: ZoneInfo) -> datetime:
    return instant.astimezone(zone).replace(tzinfo=None)


def _latest_wall(instant: datetime, zone: ZoneInfo) -> datetime:
    """The latest wall time any instant up to `instant` showed. Unless the
    offset changed within the look-back, that is `instant`'s own."""
    back = instant - timedelta(minutes=_LOOKBACK_MINUTES)
    if back.astimezone(zone).utcoffset() == instant.astimezone(zone).utcoffset():
        return _wall(instant, zone)  # no change since (zones change at most once in hours)
    return max(_wall(instant - timedelta(minutes=m), zone)
               for m in range(_LOOKBACK_MINUTES + 1))


def fires(expression: str, timezone: str, after: datetime) -> Iterator[datetime]:
    """The fire instants strictly after `after` (an aware datetime), in
    order, as UTC datetimes; each wall time at most once. The stream ends
    where the calendar does (year 9999), and at once for an expression that
    never fires (one written past `check_cron`)."""
    from cronsim import CronSim, CronSimError

    zone = check_zone(timezone)
    # What `add` refuses is refused here too: a row written in plain SQL with
    # 6 fields (cronsim reads the sixth as seconds: it fired every second) or
    # a list of 100,000 entries is named, and parked, never fired.
    cron = ALIASES.get(expression) or check_cron(expression)
    # The latest wall time any instant up to `after` showed: a repeated wall
    # time at or below it has fired already (or was due then).
    seen = _latest_wall(after, zone)
    try:
        sim = CronSim(cron, after.astimezone(zone))
    except (CronSimError, ValueError, TypeError) as error:
        # A stored expression written past `check_cron` (plain SQL): named,
        # never a failure inside the cron arithmetic.
        raise ScheduleError("cron", f"is not a valid expression ({error})") from None
    while True:
        try:
            candidate = next(sim)
            wall = candidate.replace(tzinfo=None)
            instant = candidate.astimezone(UTC)
        except (StopIteration, OverflowError):
            return  # no fire for 50 years (cronsim gives up), or past year 9999
        if instant <= after or wall <= seen:
            continue  # the clock went back: this wall time came before
        seen = wall
        yield instant


def next_fire(expression: str, timezone: str, after: datetime) -> datetime:
    """The first fire instant strictly after `after`; `ScheduleError("cron",
    …)` when there is none."""
    for instant in fires(expression, timezone, after):
        return instant
    raise ScheduleError("cron", "never fires again")


def due_fires(expression: str, timezone: str, since: datetime, now: datetime,
              limit: int) -> tuple[list[datetime], datetime]:
    """The fire instants in [since, now], oldest first, at most `limit`, and
    the next fire instant after the last of them (or after `now`)."""
    found: list[datetime] = []
    stream = fires(expression, timezone, since - timedelta(microseconds=1))
    for instant in stream:
        if instant > now:
            return found, instant
        found.append(instant)
        if len(found) == limit:
            break
    for instant in stream:
        return found, instant
    raise ScheduleError("cron", "never fires again")  # firing parks such a schedule
