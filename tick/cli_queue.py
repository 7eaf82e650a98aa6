"""The `awc` commands on the queue itself (SPEC §4.3, §7.4): enqueue, and the
operator commands (jobs, prune; retry, cancel and discard are
`tick.cli_actions`'s, status and ticks `tick.cli_history`'s).

None of them migrates (SPEC §3): they connect through
`open_operator_database`, which refuses a schema that is missing or behind.
`tick.cli` registers them on the `awc` group.
"""

from __future__ import annotations

import json
import math
import re
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from tick.cli_types import JOB_ID, Whole
from tick.settings import Settings, load_settings
from tick.text import for_terminal
from tick.timeouts import MAX_TIMEOUT_SECS
from tick.words import JOB_STATES


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def echo_json(data: Any, *, indent_on_terminal: bool = False) -> None:
    """One JSON document on stdout, keys sorted; indented for a person
    when asked and stdout is a terminal, one line for a pipe."""
    text = json.dumps(data, default=_json_default, sort_keys=True)
    if indent_on_terminal and sys.stdout.isatty():
        from tick.text import indented_json

        # One line still when indenting would multiply it (a value nested
        # deep: the indentation grows with the square of the depth).
        text = indented_json(data, len(text), default=_json_default, sort_keys=True) or text
    click.echo(text)


def choice(*values: str) -> click.Choice[str]:
    """A fixed set of values an operator may type in any case (`--state
    failed`); the command receives the value as listed, and shell completion
    offers it (SPEC §22)."""
    return click.Choice(values, case_sensitive=False)


# A span of time an operator types: `90m`, `1h`, `24h`, `7d`, `2w`; at most a
# century (a timedelta holds far more; no history or retention needs it).
_SPAN = re.compile(r"([0-9]{1,12})([smhdw])")
_SPAN_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
SPAN_MAX_SECS = 100 * 365 * 86400


def span_secs(text: str) -> int | None:
    """`text` as a span in seconds (`90m` is 5400), or None if it is not one.
    The caller says what is wrong, naming its option."""
    found = _SPAN.fullmatch(text.strip().lower())
    return int(found[1]) * _SPAN_UNITS[found[2]] if found else None


def operator_connection(settings: Settings, answer_by: float | None = None) -> Any:
    """Connect for a read-only or operator command: never migrates (SPEC §3)."""
    from tick.drivers.compose import open_operator_database

    return open_operator_database(settings, answer_by)


# -- producing ------------------------------------------------------------------


def _not_json_number(text: str) -> Any:
    raise ValueError(f"{text} is not a JSON number")


class Name(click.ParamType):  # type: ignore[type-arg]  # generic only in newer click
    """A kind, a queue or a schedule as a filter or a target: text PostgreSQL
    can hold, of at most 200 characters (no job or schedule has a longer
    name). An argument that is not valid UTF-8 reaches Python as lone
    surrogates; sent to the server it failed the command as an unexpected
    error, or a tick as a database failure (a loop restarted for ever)."""

    name = "name"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> str:
        from tick.producer import NAME_LIMIT
        from tick.text import text_refusal

        refusal = text_refusal(value, NAME_LIMIT)
        if refusal is not None:
            self.fail(refusal, param, ctx)
        return str(value)


NAME = Name()


class Seconds(click.ParamType):  # type: ignore[type-arg]  # generic only in newer click
    """A number of seconds in [`low`, `high`]. click's FloatRange lets NaN
    through (every comparison with it is false), and a NaN deadline never
    comes: `awc wait --timeout nan` polled forever. Every float option of
    the commands is this type."""

    name = "seconds"

    def __init__(self, low: float, high: float) -> None:
        self.low, self.high = low, high

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        try:
            secs = float(value)
        except (TypeError, ValueError):
            self.fail("is not a number of seconds", param, ctx)
        if not math.isfinite(secs):
            self.fail("must be a finite number of seconds", param, ctx)
        if not self.low <= secs <= self.high:
            self.fail(f"must be between {self.low:.15g} and {self.high:.15g} seconds", param, ctx)
        return secs


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("a number too large for a double is not storable")
    return value


def parse_payload(text: str) -> dict[str, Any]:
    """`--payload` as a JSON object that PostgreSQL's jsonb stores as given:
    no NaN or Infinity, no number beyond a double (SPEC §4.3)."""
    try:
        value = json.loads(text, parse_constant=_not_json_number, parse_float=_finite)
    except RecursionError:
        raise click.BadParameter("is nested too deeply", param_hint="--payload") from None
    except ValueError:
        raise click.BadParameter(
            "is not valid JSON (NaN, Infinity and numbers beyond a double are refused)",
            param_hint="--payload") from None
    if not isinstance(value, dict):
        raise click.BadParameter("must be a JSON object", param_hint="--payload")
    return value


# Where an enqueue field comes from on the command line.
# Longest --delay: a century, far beyond any real schedule, well inside a timestamp.
MAX_DELAY_SECS = 100 * 365 * 86400
HELD_SECS = 30.0  # `awc wait`: a connection lost after this long held (the loop's rule)


def parse_run_at(text: str, option: str = "--run-at") -> datetime:
    """An ISO 8601 instant (UTC if naive), or a usage error naming `option`."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter("is not an ISO 8601 instant", param_hint=option) from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@click.command("enqueue")
@click.argument("kind")
@click.option("--payload", default="{}", show_default=True,
              help="The job's payload, a JSON object.")
@click.option("--max-attempts", type=Whole(1, 2**31 - 1), default=5, show_default=True)
@click.option("--delay", type=Seconds(0, MAX_DELAY_SECS),
              help="Seconds before it may run.")
@click.option("--run-at", help="ISO 8601 instant before which it may not run (UTC if naive).")
@click.option("--priority", type=Whole(-32768, 32767), default=0, show_default=True)
@click.option("--queue", default="default", show_default=True)
@click.option("--dedupe-key", help="Return the live job with this key instead of a new one.")
@click.option("--timeout", "timeout_secs", type=Seconds(1, MAX_TIMEOUT_SECS),
              help="Seconds one run may take (1 to 604800), overriding its handler's.")
@click.option("--after", type=JOB_ID, multiple=True, metavar="ID",
              help="A job this one waits for (repeat for several).")
@click.option("--on-parent-failure", type=click.Choice(["cancel", "run"], case_sensitive=False),
              help="When a parent fails or is cancelled: cancel this job (the default) "
                   "or run it once every parent is final.")
@click.option("--traceparent", help="W3C traceparent of the trace the job joins.")
@click.option("--tracestate", help="W3C tracestate to carry with --traceparent.")
@click.option("--key", help="The tenant or unit whose jobs share the queue fairly with others'.")
def enqueue_command(
    kind: str,
    payload: str,
    max_attempts: int,
    delay: float | None,
    run_at: str | None,
    priority: int,
    queue: str,
    dedupe_key: str | None,
    timeout_secs: float | None,
    after: tuple[int, ...],
    on_parent_failure: str | None,
    traceparent: str | None,
    tracestate: str | None,
    key: str | None,
) -> None:
    """Enqueue a job of KIND and print its id."""
    from tick.producer import check_job, enqueue
    from tick.trace_context import valid_traceparent, valid_tracestate

    if delay is not None and run_at is not None:
        raise click.UsageError("give --delay or --run-at, not both")
    body = parse_payload(payload)
    when = parse_run_at(run_at) if run_at else None
    if delay is not None:  # checked on the host's clock; the run_at sent is the database's
        when = datetime.now(UTC) + timedelta(seconds=delay)
    # What the database would refuse is a usage error (an EnqueueError), before connecting.
    check_job(kind, body, max_attempts=max_attempts, run_at=when, priority=priority,
              queue=queue, dedupe_key=dedupe_key, timeout_secs=timeout_secs, key=key)
    # SPEC §21: a trace context that is not W3C is ignored, never refused:
    # the job is enqueued without it, and the operator is told so.
    if traceparent is not None and not valid_traceparent(traceparent):
        click.echo("awc: --traceparent is not a W3C traceparent "
                   "(00-<32 hex>-<16 hex>-<2 hex>); the job carries no trace context",
                   err=True)
    elif tracestate is not None and (traceparent is None or not valid_tracestate(tracestate)):
        click.echo("awc: --tracestate is ignored (it needs a valid --traceparent and "
                   "W3C list members)", err=True)
    settings = load_settings()
    with operator_connection(settings) as conn:
        if delay is not None:  # the claim compares run_at with the database's clock
            from tick.db import database_now

            when = database_now(conn) + timedelta(seconds=delay)
        job_id = enqueue(
            conn, kind, body, max_attempts=max_attempts, run_at=when,
            priority=priority, queue=queue, dedupe_key=dedupe_key, timeout_secs=timeout_secs,
            after=list(after) if after else None, on_parent_failure=on_parent_failure,
            traceparent=traceparent, tracestate=tracestate,
            key=key,
        )
    click.echo(job_id)


@click.command("wait")
@click.argument("job_id", type=JOB_ID)
@click.option("--timeout", type=Seconds(0, MAX_DELAY_SECS), default=300,
              show_default=True, help="Seconds to wait for the job to be final.")
def wait_command(job_id: int, timeout: float) -> None:
    """Wait for job JOB_ID to be final; print its result as JSON and exit 0
    if it COMPLETED, else one line naming its state and exit 1.

    \f
    SPEC §20."""
    import time

    from tick.db import session_lost
    from tick.engine.backoff import Jitter, reconnect_delay
    from tick.errors import AwcError
    from tick.waiting import wait
    from tick.watchdog import DEADLINE_GRACE_SECS

    # The timeout counts from the command's start: a database silent from
    # the start is given up on by then too, not after libpq's connect timeout.
    end = time.monotonic() + timeout
    settings = load_settings()
    outcome, lost, jitter = None, 0, Jitter(f"wait-{job_id}")
    while outcome is None:
        # A connection lost mid-wait (a failover, a pooler's restart, a role's
        # idle_session_timeout) is opened again and the wait goes on to its
        # timeout: it ended the command with a database error, the job's
        # outcome a moment away. A first connect that fails is the error.
        if lost:  # as the loop's reconnects: 0.25 s doubling to 5, jittered
            time.sleep(min(reconnect_delay(lost - 1, jitter, cap=5.0),
                           max(end - time.monotonic(), 0.0)))
        try:
            conn = operator_connection(settings, end + DEADLINE_GRACE_SECS)
        except AwcError:
            if not lost or time.monotonic() >= end:
                raise
            lost += 1
            continue
        with conn:
            opened = time.monotonic()
            try:
                outcome = wait(conn, job_id, max(end - time.monotonic(), 0.0))
            except TimeoutError:
                raise AwcError(f"job {job_id} is not final after {timeout:g}s") from None
            except Exception as error:
                if not session_lost(conn, error) or time.monotonic() >= end:
                    raise
                # The delays start again after a connection that held (an
                # hour's wait through a few failovers kept its longest one).
                lost = 1 if time.monotonic() - opened >= HELD_SECS else lost + 1
    if outcome.state != "COMPLETED":
        raise AwcError(f"job {job_id} ended {outcome.state}")
    if outcome.result_too_deep is not None:  # printed as stored, not decoded
        from tick.text import json_for_terminal

        click.echo(json_for_terminal(outcome.result_too_deep))
        return
    echo_json(outcome.result)


# -- operating ------------------------------------------------------------------


@click.group("jobs")
def jobs_group() -> None:
    """Inspect jobs."""


def table(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    """Rows as aligned columns for a person. An instant prints in UTC with
    its offset (`2026-03-01 03:00:00+00:00`), whatever the session's zone,
    so no time in a table is ambiguous (SPEC §22); a column in another zone
    (a schedule's own) is text its command made."""

    def cell(value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, datetime):
            return value.astimezone(UTC).isoformat(sep=" ", timespec="seconds")
        # A cell may hold a producer's text (a kind, a queue, an error):
        # escaped, it can neither drive the terminal nor forge a row.
        text = for_terminal(str(value).replace("\n", " "))
        return text if len(text) <= 60 else text[:57] + "..."

    grid = [list(columns)] + [[cell(row[c]) for c in columns] for row in rows]
    widths = [max(len(line[i]) for line in grid) for i in range(len(columns))]
    return "\n".join(
        "  ".join(value.ljust(width) for value, width in zip(line, widths, strict=True)).rstrip()
        for line in grid
    )


@jobs_group.command("list")
@click.option("--state",
              type=choice(*JOB_STATES))
@click.option("--kind", type=NAME)
@click.option("--queue", type=NAME)
@click.option("--limit", type=Whole(1, 10000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines.")
def jobs_list(
    state: str | None, kind: str | None, queue: str | None, limit: int, as_json: bool
) -> None:
    """List jobs, newest first."""
    from tick.admin import LIST_COLUMNS, list_jobs

    settings = load_settings()
    with operator_connection(settings) as conn:
        rows = list_jobs(conn, state=state, kind=kind, queue=queue, limit=limit)
    if as_json:
        for row in rows:
            echo_json(row)
    else:
        shown = [{**row, "progress": None if row["progress"] is None
                  else f"{row['progress']:.0%}", "waiting": row["waiting"] or None}
                 for row in rows]
        click.echo(table(shown, LIST_COLUMNS))


@jobs_group.command("show")
@click.argument("job_id", type=Whole())
def jobs_show(job_id: int) -> None:
    """Show one job in full (payload included) as JSON, with why it failed:
    its error history, newest first, with tracebacks.

    \f
    SPEC §22."""
    from tick.admin import show_job

    settings = load_settings()
    with operator_connection(settings) as conn:
        job = show_job(conn, job_id)
    echo_json(job, indent_on_terminal=True)


@click.command("prune")
def prune_command() -> None:
    """Retire completed jobs older than AWC_PRUNE_AFTER_SECS (a whole finished
    part, when one is due), delete CANCELLED ones older than it (and FAILED
    ones older than AWC_DEAD_LETTER_RETENTION_SECS, if set), now."""
    from tick.maintenance import prune

    settings = load_settings()
    total = 0
    with operator_connection(settings) as conn:
        while True:
            deleted = prune(conn, settings.prune_after_secs, force=True, budget_secs=30,
                            ledger_after_secs=settings.schedule_history_secs,
                            dead_after_secs=settings.dead_letter_retention_secs)
            total += deleted
            if deleted == 0:
                break
    click.echo(f"pruned {total} jobs")



# retry, cancel, jobs discard, pause and resume: tick/cli_actions.py (SPEC §22);
# status and ticks: tick/cli_history.py.
COMMANDS = [enqueue_command, wait_command, jobs_group, prune_command]
