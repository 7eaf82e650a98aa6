"""What an operator does next (SPEC §22): `awc retry`, `awc cancel` and
`awc jobs discard` on one job, several or a filter, and `awc pause` /
`awc resume` of a kind or a queue.

One id acts at once (SPEC §7.4); several ids or a filter print how many
jobs the action would touch and change nothing without `--yes`. A filter
touches at most `tick.bulk.BULK_CAP` jobs a run, as the console's bulk
actions do. Every change is recorded in `awc.audit_events` (`cli.retry`,
`cli.cancel`, `cli.discard`, `cli.pause`, `cli.resume`). Operator commands
never migrate (SPEC §3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from tick.cli_queue import (
    NAME,
    SPAN_MAX_SECS,
    choice,
    jobs_group,
    operator_connection,
    span_secs,
)
from tick.cli_types import JOB_ID
from tick.errors import AwcError
from tick.settings import load_settings
from tick.words import JOB_STATES

if TYPE_CHECKING:
    from tick.bulk import Selection

_ONE_DONE = {"retry": "is PENDING", "cancel": "is CANCELLED", "discard": "discarded"}
# Most ids one command names: the filter's cap, so an audit row stays bounded.
MAX_IDS = 10_000


def parse_duration(text: str) -> float:
    """`90m`, `1h`, `7d`, `30s`, `2w` as seconds, or a usage error naming
    --older-than."""
    secs = span_secs(text) or -1
    if not 0 < secs <= SPAN_MAX_SECS:
        raise click.BadParameter("must be a positive number with a unit, s, m, h, d or w "
                                 "(90m, 1h, 7d), of at most a century",
                                 param_hint="--older-than")
    return float(secs)


def _selection(action: str, ids: tuple[int, ...], state: str | None, kind: str | None,
               queue: str | None, older_than: str | None) -> Selection:
    from tick.bulk import ACTION_STATES, Selection

    filtered = state is not None or kind is not None or queue is not None or older_than
    if ids and filtered:
        raise click.UsageError("give job ids or a filter (--state, --kind, --queue, "
                               "--older-than), not both")
    if not ids and not filtered:
        raise click.UsageError("name the jobs: one or more ids, or a filter (--state, "
                               "--kind, --queue, --older-than)")
    if len(ids) > MAX_IDS:
        raise click.UsageError(f"at most {MAX_IDS:,} ids at a time; use a filter for more")
    eligible = ACTION_STATES[action]
    if state is not None and state not in eligible:
        raise click.BadParameter(
            f"{action} applies to {' or '.join(eligible)} jobs, not {state}",
            param_hint="--state")
    return Selection(tuple(dict.fromkeys(ids)), state, kind, queue,
                     None if older_than is None else parse_duration(older_than))


def _act_on_one(action: str, job_id: int) -> None:
    from tick import admin
    from tick.bulk import audit

    one = {"retry": admin.retry, "cancel": admin.cancel, "discard": admin.discard}[action]
    with operator_connection(load_settings()) as conn, conn.transaction():
        one(conn, job_id)
        audit(conn, f"cli.{action}", f"job:{job_id}", {"ids": [job_id], "count": 1})


def run_action(action: str, done: str, ids: tuple[int, ...], state: str | None,
               kind: str | None, queue: str | None, older_than: str | None,
               yes: bool) -> None:
    """One of the three job actions, as SPEC §22 says."""
    import psycopg

    from tick.bulk import BULK_CAP, apply, candidates

    selection = _selection(action, ids, state, kind, queue, older_than)
    if len(selection.ids) == 1:
        _act_on_one(action, selection.ids[0])
        click.echo(f"job {selection.ids[0]} {_ONE_DONE[action]}")
        return
    more = f" (at most {BULK_CAP:,} a run: run it again for the rest)"
    with operator_connection(load_settings()) as conn:
        if not yes:
            count = len(candidates(conn, action, selection))
            click.echo(f"{action} would touch {count:,} job{'' if count == 1 else 's'}"
                       f"{more if count >= BULK_CAP else ''}; nothing was changed: "
                       "add --yes to do it")
            return
        try:
            count = apply(conn, action, selection)
        except psycopg.errors.UniqueViolation:
            raise AwcError("a live job took the dedupe key of one of these jobs meanwhile; "
                           "nothing was changed, try again") from None
    click.echo(f"{count:,} job{'' if count == 1 else 's'} {done}"
               f"{more if count >= BULK_CAP else ''}")


def _job_options(fn: Any) -> Any:
    for option in reversed([
        click.argument("job_ids", nargs=-1, type=JOB_ID),
        click.option("--state", type=choice(*JOB_STATES),
                     help="Only jobs in this state."),
        click.option("--kind", type=NAME, help="Only jobs of this kind."),
        click.option("--queue", type=NAME, help="Only jobs in this queue."),
        click.option("--older-than", metavar="DURATION",
                     help="Only jobs finished (or, if not final, created) longer ago "
                          "than this: 90m, 1h, 7d."),
        click.option("--yes", is_flag=True, help="Do it (several ids or a filter)."),
    ]):
        fn = option(fn)
    return fn


@click.command("retry")
@_job_options
def retry_command(job_ids: tuple[int, ...], state: str | None, kind: str | None,
                  queue: str | None, older_than: str | None, yes: bool) -> None:
    """Send FAILED or CANCELLED jobs back to PENDING with fresh attempts: one
    id at once; several ids or a filter with --yes (without it, how many)."""
    run_action("retry", "retried (PENDING)", job_ids, state, kind, queue, older_than, yes)


@click.command("cancel")
@_job_options
def cancel_command(job_ids: tuple[int, ...], state: str | None, kind: str | None,
                   queue: str | None, older_than: str | None, yes: bool) -> None:
    """Cancel PENDING or RUNNING jobs (a running handler's outcome is
    discarded): one id at once; several ids or a filter with --yes."""
    run_action("cancel", "cancelled", job_ids, state, kind, queue, older_than, yes)


@jobs_group.command("discard")
@_job_options
def jobs_discard(job_ids: tuple[int, ...], state: str | None, kind: str | None,
                 queue: str | None, older_than: str | None, yes: bool) -> None:
    """Delete FAILED, CANCELLED or COMPLETED jobs: one id at once; several
    ids or a filter with --yes (without it, how many)."""
    run_action("discard", "discarded", job_ids, state, kind, queue, older_than, yes)


def _target(target: str) -> tuple[str, str]:
    from tick.limits import parse_target

    return parse_target(target)  # a LimitError is a usage error (tick/cli.py)


@click.command("pause")
@click.argument("target")
def pause_command(target: str) -> None:
    """Hold a kind or a queue back (TARGET: kind:NAME or queue:NAME): no job
    of it is claimed until `awc resume`; running ones finish.

    \f
    SPEC §22: a max_running of 0 that keeps the limit's rate."""
    from tick.bulk import audit
    from tick.limits import pause

    scope, name = _target(target)
    with operator_connection(load_settings()) as conn, conn.transaction():
        paused = pause(conn, scope, name)
        if paused:
            audit(conn, "cli.pause", f"{scope}:{name}")
    click.echo(f"{scope} {name!r} {'paused' if paused else 'was paused already'}")


@click.command("resume")
@click.argument("target")
def resume_command(target: str) -> None:
    """Release a kind or a queue `awc pause` held back: its limit gets back
    the max_running it had, or goes if it existed only for the pause."""
    from tick.bulk import audit
    from tick.limits import resume

    scope, name = _target(target)
    with operator_connection(load_settings()) as conn, conn.transaction():
        outcome = resume(conn, scope, name)
        if outcome is None:
            raise AwcError(f"{scope} {name!r} is not paused by awc pause "
                           "(see awc limits list)")
        audit(conn, "cli.resume", f"{scope}:{name}", {"limit": outcome})
    click.echo(f"{scope} {name!r} resumed")


COMMANDS = [retry_command, cancel_command, pause_command, resume_command]
