"""Durable schedules (SPEC §15): recurring jobs that need no long-running
process. Every tick fires what is due (`firing.py`); fire times come from
`times.py`. This module is the operations on a connection, the same as the
`awc schedules` commands:

    add(conn, Schedule(...)) -> "created" | "updated" | "unchanged"
    remove, pause, resume(conn, name);  trigger(conn, name) -> job id
    next_fires(conn, name, count);  preview(cron, timezone, after, count)
    history(conn, name, limit);  listing(conn);  timezone_of(conn, name)
    sync(conn, schedules, prune=False, dry_run=False);  parse_toml(text) -> [Schedule]

Nothing here commits on its own beyond its statements (autocommit
connections make each one a transaction; `sync` takes one transaction).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tick.errors import AwcError
from tick.schedules.times import ScheduleError, check_cron, check_zone, fires, next_fire
from tick.statements import sql
from tick.words import MISSED_POLICIES, OVERLAP_POLICIES

if TYPE_CHECKING:
    import psycopg

__all__ = ["Schedule", "ScheduleError", "ScheduleNotFound", "ScheduleUnusable", "add", "history",
           "listing", "next_fires", "parse_toml", "pause", "preview", "remove", "resume", "sync",
           "timezone_of", "trigger"]

NAME_LIMIT = 200
# pg_advisory_xact_lock key of `sync`: 'awc' 'syn' in ASCII.
SYNC_LOCK_KEY = 0x617763_73796E
CATCHUP_MAX = 100 * 365 * 86400  # a century, as every other duration (SPEC §2)


class ScheduleNotFound(AwcError):
    """A command named a schedule that does not exist (exit 1)."""


class ScheduleUnusable(AwcError):
    """A stored schedule whose cron or time zone awc cannot use: written by
    plain SQL past the checks of `add`, or before a check existed (a zone
    such as `localtime`). Firing parks it; a command that needs its fire
    times says so (exit 1) until an add or sync replaces it."""


def _unusable(name: str, error: ScheduleError) -> ScheduleUnusable:
    return ScheduleUnusable(f"schedule {name[:200]!r} cannot fire: its {error.field} "
                            f"{error.reason}; replace it with `awc schedules add` or sync")


@dataclass(frozen=True, slots=True)
class Schedule:
    """A schedule as declared: the `awc schedules add` options, the TOML keys
    of `sync`, the table's columns. `paused=None` keeps what is stored."""

    name: str
    cron: str
    kind: str
    payload: dict[str, Any] = field(default_factory=dict)
    timezone: str = "UTC"
    queue: str = "default"
    priority: int = 0
    max_attempts: int = 5
    missed: str = "latest"
    catchup_secs: int = 3600
    overlap: str = "allow"
    paused: bool | None = None

    def checked(self) -> Schedule:
        """This schedule, validated and normalised; `ScheduleError` names the
        first field awc cannot use."""
        from tick.producer import EnqueueError, check_job

        name = self.name
        if not isinstance(name, str) or not 1 <= len(name) <= NAME_LIMIT or "\x00" in name:
            raise ScheduleError("name", f"must be 1 to {NAME_LIMIT} characters")
        if name in (".", ".."):  # a browser resolves such a path segment: no console page
            raise ScheduleError("name", "must not be . or ..")
        cron = check_cron(self.cron)
        check_zone(self.timezone)
        if self.missed not in MISSED_POLICIES:
            raise ScheduleError("missed", "must be latest or all")
        if self.overlap not in OVERLAP_POLICIES:
            raise ScheduleError("overlap", "must be allow or skip")
        if isinstance(self.catchup_secs, bool) or not isinstance(self.catchup_secs, int) \
                or not 0 <= self.catchup_secs <= CATCHUP_MAX:
            raise ScheduleError("catchup_secs", f"must be an integer from 0 to {CATCHUP_MAX}")
        if self.paused is not None and not isinstance(self.paused, bool):
            raise ScheduleError("paused", "must be true or false")
        try:  # kind, payload, queue, priority, max_attempts: as an enqueue would
            check_job(self.kind, self.payload, max_attempts=self.max_attempts,
                      priority=self.priority, queue=self.queue)
        except EnqueueError as error:
            raise ScheduleError(error.field, error.reason) from None
        return Schedule(name, cron, self.kind, dict(self.payload), self.timezone, self.queue,
                        self.priority, self.max_attempts, self.missed, self.catchup_secs,
                        self.overlap, self.paused)


def _now(conn: psycopg.Connection[Any]) -> datetime:
    """Now on the database's clock: the due check compares with it, so a
    host whose clock is behind would start a schedule at fire times before
    it existed, or catch up the fires a pause skipped."""
    from tick.db import database_now

    return database_now(conn)


def add(conn: psycopg.Connection[Any], schedule: Schedule, *,
        now: datetime | None = None) -> str:
    """Create or replace `schedule`; "created", "updated" or "unchanged".
    A new schedule's first fire is the first after `now` (the database's
    clock unless given: `sync` reads it once for all)."""
    s = schedule.checked()
    params = {**asdict(s), "payload": json.dumps(s.payload, ensure_ascii=False),
              "next_fire_at": next_fire(s.cron, s.timezone, now or _now(conn))}
    row = conn.execute(sql("upsert_schedule"), params).fetchone()
    if row is None:
        return "unchanged"
    return "created" if row[0] else "updated"


def _existing(conn: psycopg.Connection[Any], name: str) -> tuple[str, str, str, bool]:
    row = conn.execute(sql("schedule_row"), {"name": name}).fetchone()
    if row is None:
        raise ScheduleNotFound(f"schedule {name[:200]!r} does not exist")
    return row[0], row[1], row[2], bool(row[3])


def timezone_of(conn: psycopg.Connection[Any], name: str) -> str:
    """The time zone schedule `name` reads its cron in, as stored."""
    return _existing(conn, name)[2]


def remove(conn: psycopg.Connection[Any], name: str) -> None:
    """Remove a schedule; its ledger stays until pruned."""
    if conn.execute(sql("delete_schedule"), {"name": name}).fetchone() is None:
        raise ScheduleNotFound(f"schedule {name[:200]!r} does not exist")


def pause(conn: psycopg.Connection[Any], name: str) -> None:
    """Pause a schedule: it fires nothing until resumed."""
    _set_paused(conn, name, True)


def resume(conn: psycopg.Connection[Any], name: str) -> None:
    """Resume a schedule from now: fires due while it was paused are not caught up."""
    _set_paused(conn, name, False)


def _set_paused(conn: psycopg.Connection[Any], name: str, paused: bool) -> None:
    _, cron, timezone, _ = _existing(conn, name)
    following = None  # a pause needs no fire time, so a broken schedule can be paused
    if not paused:
        try:
            following = next_fire(cron, timezone, _now(conn))
        except ScheduleError as error:
            raise _unusable(name, error) from None
    conn.execute(sql("pause_schedule"), {"name": name, "paused": paused,
                                         "next_fire_at": following})


def trigger(conn: psycopg.Connection[Any], name: str) -> int:
    """Enqueue one job of the schedule now (ledger status `manual`); its id."""
    row = conn.execute(sql("trigger_schedule"), {"name": name}).fetchone()
    if row is None:
        raise ScheduleNotFound(f"schedule {name[:200]!r} does not exist")
    return int(row[0])


def next_fires(conn: psycopg.Connection[Any], name: str, count: int = 5) -> list[datetime]:
    """The next `count` fire instants, in the schedule's time zone (so with
    its UTC offset), computed; nothing is written. Fewer when the calendar
    ends first (a cron that fires once in decades, year 9999)."""
    _, cron, timezone, _ = _existing(conn, name)
    try:
        return preview(cron, timezone, _now(conn), count)
    except ScheduleError as error:
        raise _unusable(name, error) from None


def preview(cron: str, timezone: str, after: datetime, count: int = 5) -> list[datetime]:
    """The first `count` fires of `cron` in `timezone` after `after`, in that
    zone (with its offset): `awc schedules next --cron` shows an expression
    before it is added. A bad expression or zone is a `ScheduleError`, as
    `add` would refuse it. Fewer when the calendar ends first (year 9999)."""
    check_cron(cron)
    zone = check_zone(timezone)
    found: list[datetime] = []
    try:
        for instant in fires(cron, timezone, after):
            found.append(instant.astimezone(zone))
            if len(found) == count:
                break
    except OverflowError:
        pass  # the zone's wall time of the last instant is past year 9999
    return found


def history(conn: psycopg.Connection[Any], name: str, limit: int = 20) -> list[dict[str, Any]]:
    """The schedule's ledger rows, newest first."""
    _existing(conn, name)
    cur = conn.execute(sql("schedule_history"), {"name": name, "limit": limit})
    columns = [c.name for c in cur.description or ()]
    return [dict(zip(columns, row, strict=True)) for row in cur.fetchall()]


def listing(conn: psycopg.Connection[Any], limit: int = 10_000) -> list[dict[str, Any]]:
    """Every schedule (by name), with `last_job_state`."""
    cur = conn.execute(sql("list_schedules"), {"limit": limit})
    columns = [c.name for c in cur.description or ()]
    return [dict(zip(columns, row, strict=True)) for row in cur.fetchall()]


def sync(conn: psycopg.Connection[Any], schedules: list[Schedule], *, prune: bool = False,
         dry_run: bool = False) -> dict[str, list[str]]:
    """Declare `schedules` in one transaction: each is created, updated or
    left unchanged; with `prune`, every other schedule is removed. The names
    of each, sorted, by what was done. All are checked first, so a bad one
    writes nothing. A schedule that does not set `paused` keeps its own (an
    operator's pause survives a deploy). With `dry_run`, the same answer and
    nothing written.

    Concurrent syncs take turns (an advisory lock): both succeed."""
    import psycopg

    checked = sorted((s.checked() for s in schedules), key=lambda s: s.name)
    names = [s.name for s in checked]
    if len(set(names)) != len(names):
        raise ScheduleError("name", "appears twice")
    done: dict[str, list[str]] = {"created": [], "updated": [], "unchanged": [], "removed": []}
    with conn.transaction() as tx:
        conn.execute(sql("lock_schedule_sync"), {"key": SYNC_LOCK_KEY})
        now = _now(conn)
        for s in checked:
            done[add(conn, s, now=now)].append(s.name)
        if prune:
            removed = conn.execute(sql("delete_schedules_except"), {"keep": names}).fetchall()
            done["removed"] = sorted(r[0] for r in removed)
        if dry_run:
            raise psycopg.Rollback(tx)  # the answer is known; nothing is kept
    return done


_KEYS = {f.name for f in fields(Schedule)} - {"name"}


def parse_toml(text: str) -> list[Schedule]:
    """The `[schedules.NAME]` tables of a TOML file; `ScheduleError` for an
    unknown key, a wrong type, or anything else `add` would refuse."""
    import tomllib

    try:
        doc = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as error:
        raise ScheduleError("file", f"is not TOML ({str(error)[:100]})") from None
    unknown = set(doc) - {"schedules"}
    if unknown:
        raise ScheduleError("file", f"unknown top-level key {sorted(unknown)[0]!r}")
    tables = doc.get("schedules", {})
    if not isinstance(tables, dict):
        raise ScheduleError("schedules", "must be a table of [schedules.NAME] tables")
    out = []
    for name, table in tables.items():
        where = f"schedules.{name}" if name.isprintable() else f"schedules.{name!r}"
        if not isinstance(table, dict):
            raise ScheduleError(where, "must be a table")
        bad = set(table) - _KEYS
        if bad:
            raise ScheduleError(where, f"unknown key {sorted(bad)[0]!r}")
        for key in ("cron", "kind"):
            if key not in table:
                raise ScheduleError(where, f"needs {key!r}")
        try:
            # No `paused` key: the schedule keeps what it has (new: not
            # paused), so a deploy never resumes what on-call paused (SPEC §15).
            out.append(Schedule(name=name, **table).checked())
        except ScheduleError as error:  # which schedule, in a file of many
            raise ScheduleError(f"{where[:220]}.{error.field}", error.reason) from None
    return out
