"""`awc status` and `awc ticks` (SPEC §7.4, §16, §22): did it run, and what
went wrong in the last day.

Operator commands: they never migrate (SPEC §3). Every instant they print
carries its UTC offset (`tick.cli_queue.table`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import click

from tick.cli_queue import (
    SPAN_MAX_SECS,
    choice,
    echo_json,
    operator_connection,
    parse_run_at,
    span_secs,
    table,
)
from tick.cli_types import Whole
from tick.settings import load_settings
from tick.text import clip, for_terminal
from tick.words import DRIVERS, JOB_STATES


def parse_since(text: str, now: datetime) -> datetime:
    """`--since` as an instant: an ISO 8601 instant (UTC if naive), a span
    back from `now` (`90m`, `1h`, `24h`, `7d`), or `today` (since 00:00 UTC
    of `now`'s day: the zone every table prints). `now` is the database's
    clock, the one the history's rows were written on (SPEC §16)."""
    word = text.strip().lower()
    if word == "today":
        return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    secs = span_secs(word)
    if secs is None:
        try:
            return parse_run_at(text, "--since")
        except click.BadParameter:
            raise click.BadParameter(
                "is not an ISO 8601 instant, a span such as 90m, 1h, 24h or 7d, or today",
                param_hint="--since") from None
    if secs > SPAN_MAX_SECS:
        raise click.BadParameter("is longer than a century", param_hint="--since")
    return now - timedelta(seconds=secs)


@click.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status_command(as_json: bool) -> None:
    """Jobs by state and kind, the oldest ready job's age, dead letters, the
    last tick of each driver, and the schedules with a missed or overlap fire
    in the last 24 hours."""
    from tick.admin import status

    settings = load_settings()
    with operator_connection(settings) as conn:
        data = status(conn)
    if as_json:
        echo_json(data)
        return
    click.echo("  ".join(f"{s}={data['by_state'].get(s, 0)}" for s in JOB_STATES))
    age = data["oldest_ready_age_s"]
    click.echo(f"oldest ready job: {'none' if age is None else f'{age:.1f}s'}")
    click.echo(f"dead letters: {data['dead_letters']}")
    for kind, counts in sorted(data["by_kind"].items()):  # kinds are the producers'
        click.echo(f"  {clip(for_terminal(kind), 200)}: "
                   + "  ".join(f"{s}={n}" for s, n in sorted(counts.items())))
    for driver, last in sorted(data["last_ticks"].items()):
        outcome = ("failed: " + clip(for_terminal(last["error"]), 300) if last["error"]
                   else last["stop_reason"])
        when = (f"at {_instant(last['finished_at'])}" if last["age_s"] is None
                else f"{last['age_s']:.0f}s ago")
        line = f"last {driver} tick: {when} ({outcome})"
        if last["error"]:
            ok = last["success_age_s"]
            line += "; last success: " + (
                "never" if last["last_success_at"] is None
                else f"at {_instant(last['last_success_at'])}" if ok is None
                else f"{ok:.0f}s ago")
        click.echo(line)
    for problem in data["schedule_problems"]:  # names are the operators': escaped
        click.echo(f"schedule {clip(for_terminal(problem['schedule']), 200)}: {problem['fires']} "
                   f"{problem['status']} fire(s) in the last 24 h, the last at "
                   f"{_instant(problem['last_fire_at'])} (awc schedules history NAME)")


def _instant(value: Any) -> str:
    """An instant in UTC with its offset, as the tables print it (SPEC §22);
    one Python cannot hold as PostgreSQL wrote it."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat(sep=" ", timespec="seconds")
    return str(value)


TICK_COLUMNS = ("id", "driver", "worker_id", "started_at", "finished_at", "claimed",
                "completed", "retried", "failed", "released", "rescued", "continued", "fired",
                "stop_reason", "error")


@click.command("ticks")
@click.option("--driver", type=choice(*DRIVERS))
@click.option("--since", help="Only ticks started since: an ISO 8601 instant (UTC if naive), "
                              "a span such as 90m, 1h, 24h, 7d, or today (since 00:00 UTC).")
@click.option("--failed", is_flag=True, help="Only ticks that failed or died.")
@click.option("--limit", type=Whole(1, 10000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON array.")
def ticks_command(driver: str | None, since: str | None, failed: bool, limit: int,
                  as_json: bool) -> None:
    """Did it run? Every run of the engine, newest first; `died` marks a tick
    killed before it finished.

    \f
    SPEC §16. (Click shows no help text past the form feed.)"""
    from tick.db import database_now
    from tick.history import ticks

    if since is not None:  # a bad value is a usage error before connecting
        parse_since(since, datetime.now(UTC))
    with operator_connection(load_settings()) as conn:
        when = None if since is None else parse_since(since, database_now(conn))
        rows = ticks(conn, driver=driver, since=when, failed=failed, limit=limit)
    if as_json:
        echo_json(rows)
        return
    shown: list[dict[str, Any]] = [
        {**row, "finished_at": "died"} if row["died"] else row for row in rows]
    click.echo(table(shown, TICK_COLUMNS))


COMMANDS = [status_command, ticks_command]
