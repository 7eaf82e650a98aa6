"""`awc schedules …` (SPEC §15): declare, inspect and act on schedules.

Operator commands: they never migrate (SPEC §3). A bad cron expression,
time zone or option is a usage error (exit 2) naming it, and writes nothing;
a schedule that does not exist is exit 1 naming it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from tick.cli_queue import NAME, choice, echo_json, operator_connection, table
from tick.cli_types import Whole
from tick.settings import load_settings
from tick.words import MISSED_POLICIES, OVERLAP_POLICIES

# Instants print in UTC with their offset; a fire also in the schedule's own
# zone (`*_local`), the one its cron reads (SPEC §15, §22).
LIST_COLUMNS = ("name", "cron", "timezone", "kind", "paused", "next_fire_at", "next_fire_local",
                "last_fire_at", "last_job_state")
HISTORY_COLUMNS = ("fire_at", "fire_local", "status", "job_id", "recorded_at")


def in_zone(instant: Any, timezone: str) -> str | None:
    """`instant` as wall time in `timezone` with its offset, for a table; None
    (shown `-`) for no instant, and the UTC text for a zone awc cannot read
    (a row written by plain SQL) or an instant past the calendar's end."""
    from datetime import datetime

    from tick.schedules.times import ScheduleError, check_zone

    if not isinstance(instant, datetime):
        return None
    try:
        return instant.astimezone(check_zone(timezone)).isoformat(sep=" ", timespec="seconds")
    except (ScheduleError, OverflowError, ValueError):
        return None


@click.group("schedules")
def schedules_group() -> None:
    """Durable recurring jobs, fired by every tick."""


# The most schedules `awc schedules list` prints.
LISTED = 10_000


@schedules_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON array.")
def schedules_list(as_json: bool) -> None:
    """Every schedule: cron, zone, kind, paused, next and last fire, last job's state."""
    from tick.schedules import listing

    with operator_connection(load_settings()) as conn:
        rows = listing(conn, LISTED + 1)
    if len(rows) > LISTED:  # said, never a list that silently ends
        rows = rows[:LISTED]
        click.echo(f"awc: the first {LISTED:,} schedules by name are listed; there are more",
                   err=True)
    if as_json:
        echo_json(rows)
    else:
        click.echo(table([{**row, "next_fire_local": in_zone(row["next_fire_at"],
                                                               row["timezone"])}
                          for row in rows], LIST_COLUMNS))


@schedules_group.command("add")
@click.argument("name", type=NAME)
@click.option("--cron", required=True, help="5 fields, or @hourly/@daily/@weekly/@monthly/@yearly.")
@click.option("--kind", required=True, help="The kind of the jobs it enqueues.")
@click.option("--payload", default="{}", show_default=True, help="Their payload, a JSON object.")
@click.option("--timezone", default="UTC", show_default=True,
              help="An IANA time zone name, such as Europe/Berlin (not localtime).")
@click.option("--queue", default="default", show_default=True)
@click.option("--priority", type=Whole(), default=0, show_default=True)
@click.option("--max-attempts", type=Whole(), default=5, show_default=True)
@click.option("--missed", type=choice(*MISSED_POLICIES), default=MISSED_POLICIES[0],
              show_default=True, help="Catch up the newest missed fire, or each.")
@click.option("--catchup-secs", type=Whole(), default=3600, show_default=True,
              help="Fires older than this are recorded missed, never enqueued.")
@click.option("--overlap", type=choice(*OVERLAP_POLICIES), default=OVERLAP_POLICIES[0],
              show_default=True, help="skip: no fire while the last job is PENDING or RUNNING.")
def schedules_add(name: str, cron: str, kind: str, payload: str, timezone: str, queue: str,
                  priority: int, max_attempts: int, missed: str, catchup_secs: int,
                  overlap: str) -> None:
    """Create or replace schedule NAME."""
    from tick.cli_queue import parse_payload
    from tick.schedules import Schedule, add

    body = parse_payload(payload)
    # A ScheduleError is a usage error naming the option (tick/cli.py).
    schedule = Schedule(name, cron, kind, body, timezone, queue, priority, max_attempts,
                        missed, catchup_secs, overlap).checked()
    with operator_connection(load_settings()) as conn:
        click.echo(f"schedule {_shown(name)} {add(conn, schedule)}")


_ACTS = {"remove": ("removed", "Remove schedule NAME (its ledger stays until pruned)."),
         "pause": ("paused", "Pause schedule NAME: it fires nothing until resumed."),
         "resume": ("resumed", "Resume schedule NAME from now (no catch-up).")}


def _acting(verb: str) -> Any:
    done, text = _ACTS[verb]

    @schedules_group.command(verb, help=text)
    @click.argument("name", type=NAME)
    def command(name: str) -> None:
        import tick.schedules as schedules

        with operator_connection(load_settings()) as conn:
            getattr(schedules, verb)(conn, name)
        click.echo(f"schedule {_shown(name)} {done}")

    return command


for _verb in _ACTS:
    _acting(_verb)


@schedules_group.command("trigger")
@click.argument("name", type=NAME)
def schedules_trigger(name: str) -> None:
    """Enqueue one job of NAME now (recorded `manual`) and print its id."""
    from tick.schedules import trigger

    with operator_connection(load_settings()) as conn:
        click.echo(trigger(conn, name))


@schedules_group.command("next")
@click.argument("name", required=False, type=NAME)
@click.option("--cron", help="Preview this expression instead of a schedule's (nothing is added).")
@click.option("--timezone", help="With --cron: its IANA time zone name [default: UTC].")
@click.option("--count", type=Whole(1, 1000), default=5, show_default=True)
def schedules_next(name: str | None, cron: str | None, timezone: str | None, count: int) -> None:
    """The next fire times of schedule NAME, or of --cron in --timezone
    before it is added: one ISO 8601 instant per line, in the schedule's
    zone with its offset; nothing is written.

    Fewer than --count when the calendar ends first (year 9999). A --cron
    preview is computed on this host's clock and needs no database."""
    from tick.schedules import next_fires, preview

    if (name is None) == (cron is None):
        raise click.UsageError("give a schedule NAME or --cron EXPR, not both or neither")
    if cron is None:
        if timezone is not None:
            raise click.UsageError("--timezone goes with --cron; a schedule has its own")
        assert name is not None
        with operator_connection(load_settings()) as conn:
            instants = next_fires(conn, name, count)
    else:
        from datetime import UTC, datetime

        instants = preview(cron, timezone or "UTC", datetime.now(UTC), count)
    for instant in instants:
        click.echo(instant.isoformat())


@schedules_group.command("history")
@click.argument("name", type=NAME)
@click.option("--limit", type=Whole(1, 10000), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON array.")
def schedules_history(name: str, limit: int, as_json: bool) -> None:
    """NAME's ledger: every recorded fire, newest first."""
    from tick.schedules import history, timezone_of

    with operator_connection(load_settings()) as conn:
        rows = history(conn, name, limit)
        zone = timezone_of(conn, name)
    if as_json:
        echo_json(rows)
    else:
        click.echo(table([{**row, "fire_local": in_zone(row["fire_at"], zone)}
                          for row in rows], HISTORY_COLUMNS))


@schedules_group.command("sync")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--prune", is_flag=True, help="Remove the schedules the file does not name.")
@click.option("--dry-run", is_flag=True, help="Print what it would do; write nothing.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object: the names created, updated, unchanged, removed.")
def schedules_sync(file: Path, prune: bool, dry_run: bool, as_json: bool) -> None:
    """Declare the [schedules.NAME] tables of a TOML FILE (idempotent).

    Prints each schedule it created, updated and removed, then the counts.
    A schedule whose table has no `paused` key keeps its own: an operator's
    pause survives the deploy. Concurrent syncs take turns."""
    from tick.schedules import ScheduleError, parse_toml, sync

    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise click.BadParameter(f"cannot be read ({getattr(error, 'strerror', None) or error})",
                                 param_hint="FILE") from None
    try:
        declared = parse_toml(text)
    except ScheduleError as error:
        raise click.BadParameter(f"{error.field}: {error.reason}", param_hint="FILE") from None
    with operator_connection(load_settings()) as conn:
        try:
            done = sync(conn, declared, prune=prune, dry_run=dry_run)
        except ScheduleError as error:
            raise click.BadParameter(f"{error.field}: {error.reason}", param_hint="FILE") from None
    if as_json:
        echo_json({**done, "dry_run": dry_run})
        return
    would = "would be " if dry_run else ""
    for what in ("created", "updated", "removed"):
        for name in done[what]:
            click.echo(f"schedule {_shown(name)} {would}{what}")
    counts = ", ".join(f"{len(done[what])} {what}" for what in done)
    click.echo(f"{counts}{' (dry run: nothing written)' if dry_run else ''}")


def _shown(name: str) -> str:
    """A schedule name for a terminal: as it is, unless it holds a control
    character (a line break would forge a line of this report)."""
    return name if name.isprintable() else json.dumps(name)
