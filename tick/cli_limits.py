"""`awc limits …` (SPEC §18): global concurrency and rate limits.

Operator commands: they never migrate (SPEC §3). A bad target or option is
a usage error (exit 2) naming it, and writes nothing; clearing a limit that
does not exist is exit 1 naming it.
"""

from __future__ import annotations

import click

from tick.cli_queue import echo_json, operator_connection, table
from tick.cli_types import Whole
from tick.errors import AwcError
from tick.settings import load_settings


@click.group("limits")
def limits_group() -> None:
    """Limits that hold across every tick at once."""


@limits_group.command("set")
@click.argument("target")
@click.option("--max-running", type=Whole(), help="Most RUNNING jobs at once (0 pauses).")
@click.option("--rate", type=Whole(), help="Most claims per window (with --per).")
@click.option("--per", "per_secs", type=Whole(), help="The rate's window, in seconds.")
@click.option("--per-key", is_flag=True,
              help="With kind:NAME: each key's jobs of the kind get the limit separately.")
def limits_set(target: str, max_running: int | None, rate: int | None,
               per_secs: int | None, per_key: bool) -> None:
    """Set the limit of TARGET (kind:NAME, queue:NAME, key:NAME or key:*),
    replacing any earlier one. key:* gives every key the limit separately."""
    from tick.limits import Limit, check_limit, parse_limit_target, set_limit

    # A LimitError is a usage error (tick/cli.py).
    scope, name = parse_limit_target(target, per_key)
    limit = check_limit(Limit(scope, name, max_running, rate, per_secs))
    with operator_connection(load_settings()) as conn:
        set_limit(conn, limit)
    click.echo(f"limit on {scope} {name!r} set")


def _shown_key(key: str) -> str:
    """A key as `awc limits list` writes it among others: as it is when
    plain, else quoted as a JSON string, so a key holding a space, an `=`
    or a newline can neither pass for two entries nor for another key."""
    import json
    import re

    return key if re.fullmatch(r'[^\s="\\]+', key) else json.dumps(key, ensure_ascii=False)


@limits_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON array.")
def limits_list(as_json: bool) -> None:
    """Every limit with its use now: running, claims in its window, held back."""
    from tick.limits import LIST_COLUMNS, list_limits

    with operator_connection(load_settings()) as conn:
        rows = list_limits(conn)
    if as_json:
        echo_json(rows)
    else:
        for row in rows:  # a per-key limit's busiest keys, as key=running
            row["busiest"] = " ".join(f"{_shown_key(b['key'])}={b['running']}"
                                      for b in row["busiest"] or ()) or None
        click.echo(table(rows, LIST_COLUMNS))


@limits_group.command("clear")
@click.argument("target")
@click.option("--per-key", is_flag=True, help="With kind:NAME: its per-key limit.")
def limits_clear(target: str, per_key: bool) -> None:
    """Remove the limit of TARGET (kind:NAME, queue:NAME, key:NAME or key:*)."""
    from tick.limits import clear_limit, parse_limit_target

    scope, name = parse_limit_target(target, per_key)
    with operator_connection(load_settings()) as conn:
        if not clear_limit(conn, scope, name):
            raise AwcError(f"no limit on {scope} {name!r}")
    click.echo(f"limit on {scope} {name!r} cleared")
