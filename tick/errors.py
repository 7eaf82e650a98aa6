"""The errors awc reports to an operator.

Every `AwcError` is an expected failure: the CLI prints it as one line,
`awc: <message>`, and exits 1 (SPEC §3). Messages never carry a password, a
full connection string, a payload or a secret.
"""

from __future__ import annotations


class AwcError(Exception):
    """An expected failure, reported as one line with no traceback."""


class SettingsError(AwcError):
    """A setting is missing, unparsable or out of range."""


class DatabaseError(AwcError):
    """The database could not be reached or refused a statement.

    `connection_lost` tells the two apart (SPEC §4.2): only a lost connection
    is worth reconnecting for; a statement the server refused would be
    refused again.
    """

    def __init__(self, message: str, *, connection_lost: bool = False) -> None:
        super().__init__(message)
        self.connection_lost = connection_lost


class MigrationError(AwcError):
    """The database schema does not match this awc."""


class FieldError(ValueError):
    """Input awc refuses (a job to enqueue, a schedule, a limit), named by the
    field at fault and why; the message never quotes the value, which may be
    a payload or a secret. The CLI answers it as a usage error naming the
    argument or option the field came from (exit 2)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class EnqueueError(FieldError):
    """A job the database would refuse, named by the field at fault; the
    message never quotes the value (it may be a payload or a secret)."""


class JobStateError(AwcError):
    """An operator command named a job that is missing or in the wrong state."""


class JobNotFound(JobStateError):
    """An operator command named a job that does not exist."""


def missing_extra(what: str, extra: str) -> AwcError:
    """The error for a feature whose optional dependencies are not installed.

    awc is installed from a checkout or a wheel built from one (README,
    "Installing"), not from a registry, so the hint names both ways.
    """
    return AwcError(
        f"{what} needs the '{extra}' extra: pip install '.[{extra}]' in the awc checkout,"
        f" or pip install 'dist/<wheel>.whl[{extra}]' for a wheel built there"
    )


class HandlerImportError(AwcError):
    """A module named by AWC_HANDLER_MODULES failed to import."""
