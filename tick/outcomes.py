"""What a handler returns (SPEC §5), and how each outcome is recorded.

Pure rules, no I/O: the engine asks `classify` which statement records an
outcome and `error_text` what goes into `last_error`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from tick.text import printable

ERROR_LIMIT = 500


@dataclass(frozen=True, slots=True)
class Complete:
    """The job is done; `result` (JSON-able) is stored on the job."""

    result: Any = None


@dataclass(frozen=True, slots=True)
class Retry:
    """A transient failure: try again after the backoff, up to max_attempts."""

    error: str = "retry requested"


@dataclass(frozen=True, slots=True)
class Fail:
    """A permanent failure: dead-letter the job now, never retry it."""

    error: str = "failed"


Outcome = Complete | Retry | Fail


class Record(Enum):
    """The fenced statement that records an outcome (SPEC §4.2)."""

    COMPLETE = "complete_jobs"
    RETRY = "retry_jobs"
    FAIL = "fail_jobs"
    RELEASE = "release_jobs"


def error_text(error_class: str, message: str) -> str:
    """`"<ErrorClass>: <message>"`, the message cut at 500 characters (SPEC §4.1).

    The text is storable by construction: NUL dropped and lone surrogates
    escaped, since PostgreSQL text holds neither and one bad row must not
    sink the batch it is recorded with.
    """
    return printable(f"{error_class[:100]}: {message[:ERROR_LIMIT]}")


def exception_text(error: BaseException) -> str:
    """`last_error` for an exception a handler raised."""
    try:
        message = str(error)
    except Exception:  # a hostile __str__ must not take the slot down
        message = "(the exception's message could not be read)"
    return error_text(type(error).__name__, message)


def outcome_error(outcome: Retry | Fail) -> str:
    """`last_error` for an explicit Retry or Fail. An exception given as the
    error (`Retry(exc)`) is recorded by its class and message."""
    error = outcome.error
    if isinstance(error, BaseException):
        return exception_text(error)
    return error_text(type(outcome).__name__, error if isinstance(error, str) else repr(error))
