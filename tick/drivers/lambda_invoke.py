"""Invoke the Lambda entry on this machine, as the runtime would (README,
"AWS Lambda"): `python -m tick.drivers.lambda_invoke EVENT.json`.

It reads the event (a file, or `-` for standard input), builds a context with
the function's remaining time, calls `tick.drivers.aws_lambda.handler` once
with the settings in the environment, and prints the report as JSON. A
failure is one `awc:` line and exit 1, as from `awc`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from tick.errors import AwcError


class LocalContext:
    """The attributes of a Lambda context the handler and powertools read."""

    function_name = "awc-tick-local"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:local:000000000000:function:awc-tick-local"
    log_group_name = "/aws/lambda/awc-tick-local"
    log_stream_name = "local"

    def __init__(self, timeout_secs: float) -> None:
        self.aws_request_id = str(uuid.uuid4())
        self._end = time.monotonic() + timeout_secs

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._end - time.monotonic()) * 1000))


# Lambda's largest event (a synchronous invocation's payload), in characters.
EVENT_LIMIT = 6 * 1024 * 1024


def read_event(source: str) -> Any:
    """The event from a file or standard input, as JSON: at most Lambda's
    largest payload is read (a path such as /dev/zero never ends)."""
    try:
        if source == "-":
            text = sys.stdin.read(EVENT_LIMIT + 1)
        else:
            with Path(source).open(encoding="utf-8") as file:
                text = file.read(EVENT_LIMIT + 1)
    except (OSError, UnicodeDecodeError) as error:
        raise AwcError(f"cannot read the event: {getattr(error, 'strerror', None) or error}"
                       ) from None
    if len(text) > EVENT_LIMIT:
        raise AwcError("the event is larger than a Lambda event may be (6 MB)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise AwcError(f"the event is not JSON ({error.msg}, line {error.lineno})") from None
    except RecursionError:
        raise AwcError("the event is nested too deeply to read") from None
    except ValueError:  # an integer of more digits than Python converts
        raise AwcError("the event holds a number too long to read") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tick.drivers.lambda_invoke",
                                     description="Invoke awc's Lambda handler once, locally.")
    parser.add_argument("event", help="the event as a JSON file, or - for standard input")
    parser.add_argument("--timeout", type=float, default=55.0,
                        help="the function's timeout in seconds (default 55)")
    args = parser.parse_args(argv)
    if not 1 <= args.timeout <= 900:  # NaN too: a usage error, exit 2 (SPEC §3)
        parser.error("--timeout: a Lambda function's timeout is 1 to 900 seconds")
    try:
        event = read_event(args.event)
        try:
            from tick.drivers.aws_lambda import handler
        except ImportError:
            from tick.errors import missing_extra

            raise missing_extra("the Lambda entry", "lambda") from None
        report = handler(event, LocalContext(args.timeout))
    except (AwcError, ValueError) as error:  # ValueError: an event the handler refuses
        print(f"awc: {error}", file=sys.stderr)
        return 1
    print(json.dumps(report, sort_keys=True))
    return 0


if __name__ == "__main__":
    import logging

    # powertools logs to standard output, as the Lambda runtime reads it; a
    # reader gone (`| head`) would make each log line print the logging
    # module's own traceback. This process is the local invoke alone.
    logging.raiseExceptions = False
    try:
        sys.exit(main())
    except BrokenPipeError:
        # Standard output closed early (`| head`): the report has nowhere
        # to go. Exit 1 without a traceback; standard output goes to
        # /dev/null so the interpreter's last flush finds it open.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
