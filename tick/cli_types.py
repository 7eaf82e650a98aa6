"""The whole numbers the commands take (ids, counts, priorities, ports),
written one way.

click's integer is Python's `int()`, which also reads other scripts' digits
(U+0661, the Arabic-Indic digit one, is 1), underscores (`1_0` is 10), a `+`
and surrounding spaces: `awc enqueue --after` with that digit made a job
wait for job 1. And its refusal quotes the argument back, 5,000 digits and
all. A whole number here is ASCII digits with an optional leading `-`,
within the option's range, and a refusal quotes nothing of it. And the
command group, whose ^C ends a command with one `awc:` line, the
standard output a process started without, and the process's exit.
"""

from __future__ import annotations

import errno
import io
import os
import re
import signal
import sys
import threading
from typing import Any, NoReturn

import click

# Digits enough for any bigint and a few more, so a number past the range is
# told so; beyond that it is refused before `int()` reads thousands of them.
_WHOLE = re.compile(r"-?[0-9]{1,40}", re.ASCII)
INT64 = 2**63 - 1


class Whole(click.ParamType):  # type: ignore[type-arg]  # generic only in newer click
    """A whole number in [`low`, `high`] (a bigint's range by default)."""

    name = "integer"

    def __init__(self, low: int = -INT64 - 1, high: int = INT64) -> None:
        self.low, self.high = low, high

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value  # a default
        elif isinstance(value, str) and _WHOLE.fullmatch(value):
            number = int(value)
        else:
            self.fail("is not a whole number written in the digits 0-9", param, ctx)
        if not self.low <= number <= self.high:
            self.fail(f"must be between {self.low} and {self.high}", param, ctx)
        return number


JOB_ID = Whole(1, INT64)


class Interrupted(Exception):
    """^C during a command: the `awc: interrupted` line (SPEC §3); SIGTERM:
    `awc: terminated`."""

    def __init__(self, how: str = "interrupted") -> None:
        super().__init__(how)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is, and taken as ^C is: psycopg
    cancels the statement the server is running (a BaseException raised in
    its wait left the server's backend waiting on a lock after the client
    had gone, and a pipeline half sent), and a command's `except Exception`
    does not take it for one of its own failures."""


def _terminated(signum: int, frame: Any) -> None:
    # Its text names it wherever it is told (a `tick_failed` event too).
    raise Terminated("terminated")


class AwcGroup(click.Group):
    """awc's command group: ^C during a command ends it with one `awc:` line.
    click turned it into its Abort, after a blank line on stderr (for a
    terminal's `^C` echo), and awc printed `awc: aborted`. So does SIGTERM
    (`awc wait` stopped by a supervisor or `timeout` died of the signal with
    nothing said); `tick`, `loop`, `maintenance run` and `ui` put their own
    stop in its place once they run."""

    def invoke(self, ctx: click.Context) -> Any:
        if threading.current_thread() is threading.main_thread():  # as signal requires
            signal.signal(signal.SIGTERM, _terminated)
        try:
            return super().invoke(ctx)
        except Terminated:
            raise Interrupted("terminated") from None
        except KeyboardInterrupt:
            raise Interrupted from None


class ClosedOutput(io.TextIOBase):
    """Standard output when the process started with it closed (`>&-`):
    Python leaves `sys.stdout` None, and click then prints nothing and says
    nothing, so `awc enqueue` exited 0 with the new job's id lost. Writing
    here fails, and the command ends with one `awc:` line and exit 1."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "standard output is closed")


def standard_streams() -> None:
    """The streams of a process started with one closed (`>&-`, `2>&-`),
    which Python leaves None: standard output fails when written (the
    command's result is lost otherwise); standard error takes the events
    nowhere, and the work goes on (every event write failed, and `awc tick`
    with a job exited 1 saying nothing)."""
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (the process's, for its life)
    if sys.stdout is None:
        sys.stdout = ClosedOutput()


# How long the threads a handler started and left running may take to end
# once the command is done, seconds.
STRAY_THREADS_SECS = 1.0


def exit_process(code: int) -> NoReturn:
    """Exit with `code`, whatever threads a handler left running.

    The interpreter's exit joins every non-daemon thread, and awc starts
    none: a handler's thread that never ended kept `awc tick` alive after
    its report (SIGTERM did nothing: awc's handler only relays it), until
    cron's `timeout` killed it a minute later and the next run on the host
    was skipped. Such threads get a moment to end; then the exit functions
    (a tracer's flush) run, the streams are flushed and the process ends.

    The exit code is decided here, and a stop signalled from now on (the
    tail of a burst `timeout` sends a process and its group) is ignored:
    the interpreter's finalization puts the default action back on a signal
    Python handles, and a late SIGTERM killed a process that had released
    its jobs and said so (exit -15 for 0). One ignored stays ignored."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, signal.SIG_IGN)
    stray = [t for t in threading.enumerate()
             if not t.daemon and t is not threading.main_thread() and t.is_alive()]
    if stray:
        import time

        until = time.monotonic() + STRAY_THREADS_SECS
        for thread in stray:
            thread.join(max(0.0, until - time.monotonic()))
        if any(t.is_alive() for t in stray):
            import atexit
            import contextlib

            getattr(atexit, "_run_exitfuncs", lambda: None)()
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(OSError, ValueError, AttributeError):  # gone, closed,
                    stream.flush()  # or None (the process started without it)
            os._exit(code)
    sys.exit(code)
