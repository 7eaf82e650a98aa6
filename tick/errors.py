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
    """The database could not be reached or refused a statement."""


class MigrationError(AwcError):
    """The database schema does not match this awc."""


class JobStateError(AwcError):
    """An operator command named a job that is missing or in the wrong state."""


class HandlerImportError(AwcError):
    """A module named by AWC_HANDLER_MODULES failed to import."""
