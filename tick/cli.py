"""The `awc` command (SPEC §7.1, §7.4, §13).

Exit codes (SPEC §3): 0 the command did its work (a tick whose jobs failed
included), 1 a startup or runtime error, printed as one line `awc: <error>`,
2 a usage error.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

import click

from tick.cli_actions import COMMANDS as ACTION_COMMANDS
from tick.cli_history import COMMANDS as HISTORY_COMMANDS
from tick.cli_limits import limits_group
from tick.cli_queue import COMMANDS as QUEUE_COMMANDS
from tick.cli_queue import NAME, echo_json
from tick.cli_schedules import schedules_group
from tick.cli_types import AwcGroup, Interrupted, Whole, exit_process, standard_streams
from tick.cli_ui import ui_command
from tick.errors import AwcError, FieldError
from tick.settings import COUNT_MAX, MAX_CONCURRENCY, WEEK, Settings, load_settings


def _connect(settings: Settings) -> Any:
    """Connect and migrate per AWC_MIGRATE (SPEC §3 order): for the commands
    that run jobs or change the schema."""
    from tick.drivers.compose import open_database

    return open_database(settings)


@click.group(cls=AwcGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="awc-worker", prog_name="awc")
def cli() -> None:
    """awc: run background jobs from a PostgreSQL queue in bounded ticks."""


# -- running jobs ---------------------------------------------------------------


def _stop_on_signals(stop: threading.Event, wake: Callable[[], None] | None = None) -> None:
    """SIGTERM/SIGINT: set `stop` (claim nothing more, let running jobs finish
    within the stop grace, release the rest: SPEC §7.1), then `wake` what
    waits for work, so it sees the stop at once.

    Not in the signal handler: setting an event or putting to a queue takes
    a lock, and a second signal handled inside that, on the same thread,
    waited for ever on the lock its own frame held (a burst of SIGTERMs, as
    `timeout` sends to a process and its group, hung `awc loop` and `awc
    tick` about one time in three). The handler does nothing; the signal's
    byte reaches a thread through the wakeup pipe, and that thread stops."""
    import os

    reader, writer = os.pipe()
    os.set_blocking(writer, False)  # a full pipe drops a byte, never blocks a handler

    def relay() -> None:
        while os.read(reader, 64):
            stop.set()
            if wake is not None:
                wake()

    threading.Thread(target=relay, name="awc-signals", daemon=True).start()
    signal.set_wakeup_fd(writer, warn_on_full_buffer=False)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _let_through)


def _let_through(signum: int, frame: Any) -> None:
    """A signal's Python handler: nothing (its byte went down the wakeup pipe)."""


@cli.command("tick")
@click.option("--max-jobs", type=Whole(1, COUNT_MAX),
              help="Most jobs to claim [AWC_TICK_MAX_JOBS].")
@click.option("--max-secs", type=Whole(1, WEEK),
              help="Wall-time budget in seconds [AWC_TICK_MAX_SECS].")
@click.option("--concurrency", type=Whole(1, MAX_CONCURRENCY),
              help="Jobs run at once [AWC_WORKER_CONCURRENCY].")
@click.option("--kind", "kinds", multiple=True, type=NAME,
              help="Only claim this kind (repeatable).")
@click.option("--queue", "queues", multiple=True, type=NAME,
              help="Only claim from this queue (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--as-events", is_flag=True,
              help="For a log file: print nothing on stdout; the report is a `tick` event and "
                   "a failure a `tick_failed` event, each with its time, on the event stream.")
def tick_command(
    max_jobs: int | None,
    max_secs: int | None,
    concurrency: int | None,
    kinds: tuple[str, ...],
    queues: tuple[str, ...],
    as_json: bool,
    as_events: bool,
) -> None:
    """Run one tick: claim up to N jobs, run them, record outcomes, exit.

    \f
    With --as-events every line the tick writes is an event with its `ts`
    (the cron line appends them to /var/log/awc/tick.log), and `--json`
    keeps exactly the TickReport keys of SPEC §6 (docs/decisions,
    "timestamped tick logs")."""
    from tick.drivers.once import run_cli_tick

    if as_json and as_events:
        raise click.UsageError("give --json or --as-events, not both")

    def run() -> Any:
        settings = load_settings(
            tick_max_jobs=max_jobs, tick_max_secs=max_secs, worker_concurrency=concurrency
        )
        stop = threading.Event()
        return run_cli_tick(
            settings,
            kinds=list(kinds),
            queues=list(queues),
            stop=stop,
            on_engine=lambda engine: _stop_on_signals(stop, engine.wake),
        )

    if not as_events:
        report = run()
        if as_json:
            echo_json(report.as_dict())
        else:
            click.echo(report.summary())
        return
    from tick.events import StreamEvents

    events = StreamEvents(_log_format())
    try:
        report = run()
    except (Exception, KeyboardInterrupt) as error:  # the `awc:` line's text, with a time
        events.log("error", "tick_failed", error=failure(error))
        raise click.exceptions.Exit(1) from None
    events.log("info", "tick", **report.as_dict())


def _log_format() -> str:
    """AWC_LOG_FORMAT as the event stream reads it, before (or without)
    valid settings: a failure to load them is itself an event."""
    return "text" if os.environ.get("AWC_LOG_FORMAT", "json").strip().lower() == "text" else "json"


@cli.command("loop")
@click.option("--concurrency", type=Whole(1, MAX_CONCURRENCY),
              help="Jobs run at once [AWC_WORKER_CONCURRENCY].")
@click.option("--kind", "kinds", multiple=True, type=NAME,
              help="Only claim this kind (repeatable).")
@click.option("--queue", "queues", multiple=True, type=NAME,
              help="Only claim from this queue (repeatable).")
def loop_command(concurrency: int | None, kinds: tuple[str, ...], queues: tuple[str, ...]) -> None:
    """Run ticks continuously until SIGTERM/SIGINT (then drain and exit 0)."""
    from tick.drivers.loop import run_loop

    settings = load_settings(worker_concurrency=concurrency)
    stop = threading.Event()
    engines: list[Any] = []

    def wake() -> None:
        for engine in engines:
            engine.wake()

    _stop_on_signals(stop, wake)
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
    _stop_on_signals(stop)
    run_maintenance_role(settings, stop)


@maintenance_group.command("tick")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def maintenance_tick(as_json: bool) -> None:
    """Run maintenance once: rescue, and prune when due."""
    from tick.drivers.compose import maintenance_of
    from tick.engine.maintain import maintain
    from tick.engine.spans import maintenance_pass
    from tick.events import StreamEvents
    from tick.history import TickStart

    settings = load_settings()
    with _connect(settings) as conn, \
            maintenance_pass("maintenance", settings.worker_id) as reported:  # SPEC §21
        done, report = maintain(conn, maintenance_of(settings),
                                events=StreamEvents(settings.log_format),
                                start=TickStart("maintenance", settings.worker_id), alone=True)
        reported.append(report)
    data = {"rescued": done.rescued, "rescued_failed": done.rescued_failed,
            "pruned": done.pruned, "fired": done.fired}
    if as_json:
        echo_json(data)
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


for _command in QUEUE_COMMANDS:  # enqueue and the operator commands (tick/cli_queue.py)
    cli.add_command(_command)
for _command in ACTION_COMMANDS:  # retry, cancel, pause, resume (tick/cli_actions.py)
    cli.add_command(_command)
for _command in HISTORY_COMMANDS:  # status and ticks (tick/cli_history.py)
    cli.add_command(_command)
cli.add_command(schedules_group)  # tick/cli_schedules.py
cli.add_command(limits_group)  # tick/cli_limits.py
cli.add_command(ui_command)  # tick/cli_ui.py


# -- refused input ----------------------------------------------------------------


def field_hint(command: click.Command, field: str) -> str:
    """The argument or option of `command` a refused field came from, as a
    usage error names it (`KIND`, `--max-attempts`); a field naming two
    (`rate and per_secs`) names both; one the command has not, as it is."""
    words = re.split(r"( and | or )", field)
    return "".join(_param_hint(command, word) if n % 2 == 0 else word
                   for n, word in enumerate(words))


def _param_hint(command: click.Command, name: str) -> str:
    for param in command.params:
        if param.name == name:
            if isinstance(param, click.Argument):
                return param.human_readable_name
            return max(param.opts, key=len)
    return name


def _field_errors_are_usage_errors(command: click.Command) -> None:
    """Every command answers a `FieldError` (a job, schedule or limit awc
    refuses) as a usage error naming its argument or option (exit 2), here
    rather than in each command."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _field_errors_are_usage_errors(sub)
        return
    callback = command.callback
    if callback is None:
        return

    @functools.wraps(callback)
    def answered(*args: Any, **kwargs: Any) -> Any:
        try:
            return callback(*args, **kwargs)
        except FieldError as error:
            raise click.BadParameter(error.reason,
                                     param_hint=field_hint(command, error.field)) from None

    command.callback = answered


_field_errors_are_usage_errors(cli)


def shown(message: str) -> str:
    """An error message as the `awc:` line prints it (SPEC §3): no secret
    (whatever library quoted one), and nothing a terminal would act on, so
    one line whatever foreign text it holds."""
    from tick.redaction import redacted
    from tick.text import for_terminal

    return for_terminal(redacted(message))


def failure(error: BaseException) -> str:
    """The text of the `awc:` line for a command's failure (SPEC §3)."""
    if isinstance(error, AwcError):
        return shown(str(error))
    if isinstance(error, (KeyboardInterrupt, Interrupted)):
        return str(error) or "interrupted"
    return shown(_unexpected(error))


def main(argv: list[str] | None = None) -> None:
    """The console script: one line and exit 1 for any error, 2 for usage."""
    from tick.events import bridge_logging

    standard_streams()
    bridge_logging(os.environ.get("AWC_LOG_FORMAT", "json"))
    try:
        code = cli.main(args=argv, prog_name="awc", standalone_mode=False)
    except click.ClickException as error:
        error.show()
        exit_process(error.exit_code)
    except click.exceptions.Abort:
        click.echo("awc: aborted", err=True)
        exit_process(1)
    except (Exception, KeyboardInterrupt) as error:
        click.echo(f"awc: {failure(error)}", err=True)
        exit_process(1)
    exit_process(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
