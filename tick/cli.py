"""The `awc` command (SPEC §7.1, §7.4, §13).

Exit codes (SPEC §3): 0 the command did its work (a tick whose jobs failed
included), 1 a startup or runtime error, printed as one line `awc: <error>`,
2 a usage error.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from tick.errors import AwcError
from tick.settings import Settings, load_settings


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, default=_json_default, sort_keys=True))


def _connect(settings: Settings) -> Any:
    """Connect and migrate per AWC_MIGRATE (SPEC §3 order): for the commands
    that run jobs or change the schema."""
    from tick.drivers.compose import open_database

    return open_database(settings)


def _operator(settings: Settings) -> Any:
    """Connect for a read-only or operator command: never migrates (SPEC §3)."""
    from tick.drivers.compose import open_operator_database

    return open_operator_database(settings)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="awc-worker", prog_name="awc")
def cli() -> None:
    """awc: run background jobs from a PostgreSQL queue in bounded ticks."""


# -- running jobs ---------------------------------------------------------------


def _install_stop_handlers(stop: threading.Event, wake: Any) -> None:
    """SIGTERM/SIGINT: claim nothing more, let running jobs finish within the
    stop grace, release the rest (SPEC §7.1)."""

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()
        wake()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


@cli.command("tick")
@click.option("--max-jobs", type=int, help="Most jobs to claim [AWC_TICK_MAX_JOBS].")
@click.option("--max-secs", type=int, help="Wall-time budget in seconds [AWC_TICK_MAX_SECS].")
@click.option("--concurrency", type=int, help="Jobs run at once [AWC_WORKER_CONCURRENCY].")
@click.option("--kind", "kinds", multiple=True, help="Only claim this kind (repeatable).")
@click.option("--queue", "queues", multiple=True, help="Only claim from this queue (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def tick_command(
    max_jobs: int | None,
    max_secs: int | None,
    concurrency: int | None,
    kinds: tuple[str, ...],
    queues: tuple[str, ...],
    as_json: bool,
) -> None:
    """Run one tick: claim up to N jobs, run them, record outcomes, exit."""
    from tick.drivers.once import run_cli_tick

    settings = load_settings(
        tick_max_jobs=max_jobs, tick_max_secs=max_secs, worker_concurrency=concurrency
    )
    stop = threading.Event()
    report = run_cli_tick(
        settings,
        kinds=list(kinds),
        queues=list(queues),
        stop=stop,
        on_engine=lambda engine: _install_stop_handlers(stop, engine.wake),
    )
    if as_json:
        _echo_json(report.as_dict())
    else:
        click.echo(report.summary())


@cli.command("loop")
@click.option("--concurrency", type=int, help="Jobs run at once [AWC_WORKER_CONCURRENCY].")
@click.option("--kind", "kinds", multiple=True, help="Only claim this kind (repeatable).")
@click.option("--queue", "queues", multiple=True, help="Only claim from this queue (repeatable).")
def loop_command(concurrency: int | None, kinds: tuple[str, ...], queues: tuple[str, ...]) -> None:
    """Run ticks continuously until SIGTERM/SIGINT (then drain and exit 0)."""
    from tick.drivers.loop import run_loop

    settings = load_settings(worker_concurrency=concurrency)
    stop = threading.Event()
    engines: list[Any] = []

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()
        for engine in engines:
            engine.wake()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    run_loop(settings, stop, on_engine=engines.append, kinds=list(kinds), queues=list(queues))


@cli.group("maintenance")
def maintenance_group() -> None:
    """Rescue expired leases and prune old jobs, without claiming any."""


@maintenance_group.command("run")
def maintenance_run() -> None:
    """Run maintenance every AWC_MAINTENANCE_INTERVAL_SECS until a signal."""
    from tick.drivers.loop import run_maintenance_role

    settings = load_settings()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    run_maintenance_role(settings, stop)


@maintenance_group.command("tick")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def maintenance_tick(as_json: bool) -> None:
    """Run maintenance once: rescue, and prune when due."""
    from tick.maintenance import run_maintenance

    settings = load_settings()
    with _connect(settings) as conn:
        done = run_maintenance(conn, settings.prune_after_secs)
    data = {"rescued": done.rescued, "rescued_failed": done.rescued_failed,
            "pruned": done.pruned}
    if as_json:
        _echo_json(data)
    else:
        click.echo(" ".join(f"{k}={v}" for k, v in data.items()))


# -- schema ---------------------------------------------------------------------


@cli.command("migrate")
def migrate_command() -> None:
    """Apply pending migrations (under an advisory lock)."""
    from tick.db import connect
    from tick.migrate import migrate

    settings = load_settings()
    with connect(settings.dsn(), prepare=settings.db_prepare) as conn:
        result = migrate(conn, "auto")
    if result.applied:
        names = ", ".join(f"{v:04d}" for v in result.applied)
        click.echo(f"applied {names}; schema at {result.current:04d}")
    else:
        click.echo(f"schema up to date at {result.current:04d}")


# -- producing ------------------------------------------------------------------


def _not_json_number(text: str) -> Any:
    raise ValueError(f"{text} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("a number too large for a double is not storable")
    return value


def _parse_payload(text: str) -> dict[str, Any]:
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
_ENQUEUE_OPTIONS = {"kind": "KIND", "payload": "--payload", "max_attempts": "--max-attempts",
                    "run_at": "--run-at", "priority": "--priority", "queue": "--queue",
                    "dedupe_key": "--dedupe-key"}
# Longest --delay: a century, far beyond any real schedule, well inside a timestamp.
MAX_DELAY_SECS = 100 * 365 * 86400


def _parse_run_at(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter("is not an ISO 8601 instant", param_hint="--run-at") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@cli.command("enqueue")
@click.argument("kind")
@click.option("--payload", default="{}", show_default=True,
              help="The job's payload, a JSON object.")
@click.option("--max-attempts", type=click.IntRange(1, 2**31 - 1), default=5, show_default=True)
@click.option("--delay", type=click.FloatRange(0, MAX_DELAY_SECS),
              help="Seconds before it may run.")
@click.option("--run-at", help="ISO 8601 instant before which it may not run (UTC if naive).")
@click.option("--priority", type=click.IntRange(-32768, 32767), default=0, show_default=True)
@click.option("--queue", default="default", show_default=True)
@click.option("--dedupe-key", help="Return the live job with this key instead of a new one.")
def enqueue_command(
    kind: str,
    payload: str,
    max_attempts: int,
    delay: float | None,
    run_at: str | None,
    priority: int,
    queue: str,
    dedupe_key: str | None,
) -> None:
    """Enqueue a job of KIND and print its id."""
    from tick.queue import EnqueueError, check_job, enqueue

    if delay is not None and run_at is not None:
        raise click.UsageError("give --delay or --run-at, not both")
    if delay is not None and not math.isfinite(delay):
        raise click.BadParameter("must be a finite number of seconds", param_hint="--delay")
    body = _parse_payload(payload)
    when = _parse_run_at(run_at) if run_at else None
    if delay is not None:
        when = datetime.now(UTC) + timedelta(seconds=delay)
    try:  # what the database would refuse is a usage error, before connecting
        check_job(kind, body, max_attempts=max_attempts, run_at=when, priority=priority,
                  queue=queue, dedupe_key=dedupe_key)
    except EnqueueError as error:
        raise click.BadParameter(error.reason,
                                 param_hint=_ENQUEUE_OPTIONS.get(error.field, error.field)
                                 ) from None
    settings = load_settings()
    with _operator(settings) as conn:
        job_id = enqueue(
            conn, kind, body, max_attempts=max_attempts, run_at=when,
            priority=priority, queue=queue, dedupe_key=dedupe_key,
        )
    click.echo(job_id)


# -- operating ------------------------------------------------------------------


@cli.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status_command(as_json: bool) -> None:
    """Jobs by state and kind, the oldest ready job's age, dead letters."""
    from tick.admin import status

    settings = load_settings()
    with _operator(settings) as conn:
        data = status(conn)
    if as_json:
        _echo_json(data)
        return
    states = ("PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED")
    click.echo("  ".join(f"{s}={data['by_state'].get(s, 0)}" for s in states))
    age = data["oldest_ready_age_s"]
    click.echo(f"oldest ready job: {'none' if age is None else f'{age:.1f}s'}")
    click.echo(f"dead letters: {data['dead_letters']}")
    for kind, counts in sorted(data["by_kind"].items()):
        click.echo(f"  {kind}: " + "  ".join(f"{s}={n}" for s, n in sorted(counts.items())))


@cli.group("jobs")
def jobs_group() -> None:
    """Inspect jobs."""


def _table(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    def cell(value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, datetime):
            return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
        text = str(value).replace("\n", " ")
        return text if len(text) <= 60 else text[:57] + "..."

    grid = [list(columns)] + [[cell(row[c]) for c in columns] for row in rows]
    widths = [max(len(line[i]) for line in grid) for i in range(len(columns))]
    return "\n".join(
        "  ".join(value.ljust(width) for value, width in zip(line, widths, strict=True)).rstrip()
        for line in grid
    )


@jobs_group.command("list")
@click.option("--state",
              type=click.Choice(["PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED"]))
@click.option("--kind")
@click.option("--queue")
@click.option("--limit", type=click.IntRange(1, 10000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines.")
def jobs_list(
    state: str | None, kind: str | None, queue: str | None, limit: int, as_json: bool
) -> None:
    """List jobs, newest first."""
    from tick.admin import LIST_COLUMNS, list_jobs

    settings = load_settings()
    with _operator(settings) as conn:
        rows = list_jobs(conn, state=state, kind=kind, queue=queue, limit=limit)
    if as_json:
        for row in rows:
            _echo_json(row)
    else:
        click.echo(_table(rows, LIST_COLUMNS))


@jobs_group.command("show")
@click.argument("job_id", type=int)
def jobs_show(job_id: int) -> None:
    """Show one job in full (payload included), as JSON."""
    from tick.admin import show_job

    settings = load_settings()
    with _operator(settings) as conn:
        _echo_json(show_job(conn, job_id))


@cli.command("retry")
@click.argument("job_id", type=int)
def retry_command(job_id: int) -> None:
    """Send a FAILED or CANCELLED job back to PENDING with fresh attempts."""
    from tick.admin import retry

    settings = load_settings()
    with _operator(settings) as conn:
        retry(conn, job_id)
    click.echo(f"job {job_id} is PENDING")


@cli.command("cancel")
@click.argument("job_id", type=int)
def cancel_command(job_id: int) -> None:
    """Cancel a PENDING or RUNNING job (a running handler's outcome is discarded)."""
    from tick.admin import cancel

    settings = load_settings()
    with _operator(settings) as conn:
        cancel(conn, job_id)
    click.echo(f"job {job_id} is CANCELLED")


@cli.command("prune")
def prune_command() -> None:
    """Delete COMPLETED and CANCELLED jobs older than AWC_PRUNE_AFTER_SECS, now."""
    from tick.maintenance import prune

    settings = load_settings()
    total = 0
    with _operator(settings) as conn:
        while True:
            deleted = prune(conn, settings.prune_after_secs, force=True, budget_secs=30)
            total += deleted
            if deleted == 0:
                break
    click.echo(f"pruned {total} jobs")


@cli.command("demo")
@click.option("--dir", "directory", default="./awc-demo", show_default=True,
              help="Where the embedded PostgreSQL and the file store live.")
@click.option("--database-url", help="Use this PostgreSQL instead of an embedded one.")
def demo_command(directory: str, database_url: str | None) -> None:
    """Run awc end to end on an embedded PostgreSQL and a file:// store."""
    from tick.demo import run_demo

    run_demo(directory, database_url)


def _unexpected(error: BaseException) -> str:
    """One line for a failure no command expected (SPEC §3): by type and
    scrubbed message; never a traceback, a password or a payload."""
    from tick.db import database_error, scrub
    from tick.text import clip

    psycopg = sys.modules.get("psycopg")
    if psycopg is not None and isinstance(error, psycopg.Error):
        return str(database_error(error, None, "database error"))
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and isinstance(error, pydantic.ValidationError):
        return f"invalid value: {error.error_count()} validation errors ({error.title})"
    if isinstance(error, OSError) and error.strerror:
        where = f": {error.filename}" if error.filename else ""
        return f"{error.strerror}{where}"
    return f"unexpected error: {type(error).__name__}: {clip(scrub(str(error)), 200)}"


def main(argv: list[str] | None = None) -> None:
    """The console script: one line and exit 1 for any error, 2 for usage."""
    from tick.events import bridge_logging

    bridge_logging(os.environ.get("AWC_LOG_FORMAT", "json"))
    try:
        code = cli.main(args=argv, prog_name="awc", standalone_mode=False)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except click.exceptions.Abort:
        click.echo("awc: aborted", err=True)
        sys.exit(1)
    except AwcError as error:
        click.echo(f"awc: {error}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo("awc: interrupted", err=True)
        sys.exit(1)
    except Exception as error:
        click.echo(f"awc: {_unexpected(error)}", err=True)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
