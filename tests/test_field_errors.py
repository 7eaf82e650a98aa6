"""One field error: enqueue, schedules and limits refuse input with a
`FieldError(field, reason)`, and the CLI names the argument or option the
field came from in one place (tick/cli.py). No database."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from tick.cli import cli, field_hint
from tick.errors import FieldError, JobNotFound, JobStateError
from tick.limits import LimitError
from tick.producer import EnqueueError
from tick.schedules import ScheduleError


def command(*path: str) -> click.Command:
    found: click.Command = cli
    for name in path:
        assert isinstance(found, click.Group)
        found = found.commands[name]
    return found


@pytest.mark.parametrize("error", [EnqueueError, ScheduleError, LimitError])
def test_every_refusal_of_input_is_a_field_error(error: type[FieldError]) -> None:
    refused = error("queue", "must not be empty")
    assert isinstance(refused, FieldError) and isinstance(refused, ValueError)
    assert (refused.field, refused.reason, str(refused)) == (
        "queue",
        "must not be empty",
        "queue: must not be empty",
    )


@pytest.mark.parametrize(
    ("path", "field", "hint"),
    [
        (("enqueue",), "kind", "KIND"),
        (("enqueue",), "max_attempts", "--max-attempts"),
        (("schedules", "add"), "kind", "--kind"),
        (("schedules", "add"), "name", "NAME"),
        (("limits", "set"), "per_secs", "--per"),
        (("limits", "set"), "rate and per_secs", "--rate and --per"),
        (("limits", "set"), "max_running or rate", "--max-running or --rate"),
        (("limits", "clear"), "target", "TARGET"),
        (("pause",), "target", "TARGET"),
        (("limits", "set"), "something", "something"),
    ],
)
def test_a_field_is_named_as_the_command_line_spells_it(
    path: tuple[str, ...], field: str, hint: str
) -> None:
    assert field_hint(command(*path), field) == hint


def test_a_refused_field_is_a_usage_error_naming_its_option() -> None:
    result = CliRunner().invoke(cli, ["limits", "set", "kind:a", "--rate", "5"])
    assert result.exit_code == 2
    assert "--rate and --per" in result.output and "go together" in result.output


def test_a_missing_job_is_known_by_its_type() -> None:
    assert issubclass(JobNotFound, JobStateError)
