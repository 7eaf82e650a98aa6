"""What a handler returns (SPEC §5), and the pure rules that make it a state.

No I/O (table-tested in tests/test_outcome_rules.py):

- `outcome_of` turns a handler's return value into the fenced statement that
  records it (`Record`) and the detail stored with it (result or error);
- `label_of` names what a recorded outcome did, from the statement and the
  state the database reports back;
- the labels themselves (`Label`), their levels and report fields are the
  shared vocabulary of `tick/words.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tick.redaction import redacted_head
from tick.text import json_value_text, printable
from tick.words import Label, Record

# The most characters of JSON one checkpoint, or a Continue's state, may
# save (SPEC §17): a checkpoint is rewritten often, and each later claim
# reads it back, so its state is a cursor into the work, not the work.
CHECKPOINT_LIMIT = 1_000_000

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


# The longest a Continue may wait: a year.
MAX_DELAY_SECS = 365 * 86400.0


@dataclass(frozen=True, slots=True)
class Continue:
    """Hand the rest of the work to a later claim (SPEC §17): the job goes
    back to PENDING after `delay_secs` with its attempt refunded, `state`
    (when given, any JSON value) saved as its checkpoint for `ctx.saved`."""

    state: Any = None
    delay_secs: float = 0.0

    def __post_init__(self) -> None:
        delay = self.delay_secs
        if isinstance(delay, bool) or not isinstance(delay, int | float) \
                or not 0 <= delay <= MAX_DELAY_SECS:
            raise ValueError(f"Continue: delay_secs must be a number of seconds in "
                             f"[0, {MAX_DELAY_SECS:.0f}]")



def label_of(record: Record, state: str) -> Label:
    """The label of an outcome the database recorded, by its statement and
    the state it left the job in (a Retry at max_attempts is `failed`)."""
    if record is Record.RELEASE:
        return "released"
    if record is Record.CONTINUE:
        return "continued"
    if state == "FAILED":
        return "failed"
    if state == "PENDING":
        return "retried"
    return "completed"


def lost_label(state: str | None) -> Label:
    """The label of an outcome the fence refused: `cancelled` when an
    operator cancelled the job, else `discarded` (rescued or re-claimed)."""
    return "cancelled" if state == "CANCELLED" else "discarded"


def error_text(error_class: str, message: str) -> str:
    """`"<ErrorClass>: <message>"`, the message cut at 500 characters (SPEC §4.1).

    The text is storable by construction: NUL dropped and lone surrogates
    escaped, since PostgreSQL text holds neither and one bad row must not
    sink the batch it is recorded with; and it holds no secret awc knows of
    nor any connection string's password.
    """
    # SPEC §3: a handler's `str(exc)` quoting DATABASE_URL was stored and
    # shown as it was.
    shown = redacted_head(message, ERROR_LIMIT)
    return printable(f"{redacted_head(error_class, 100)}: {shown}")


def exception_text(error: BaseException) -> str:
    """`last_error` for an exception a handler raised."""
    try:
        message = str(error)
    # A hostile __str__ must not take the slot down, nor decide the outcome:
    # one that raises KeyboardInterrupt or SystemExit made the run a Fail
    # named after that (awc's signals are handled, never raised: this is
    # the message's, not an interrupt).
    except BaseException:
        message = "(the exception's message could not be read)"
    return error_text(type(error).__name__, message)


def outcome_error(outcome: Retry | Fail) -> str:
    """`last_error` for an explicit Retry or Fail. An exception given as the
    error (`Retry(exc)`) is recorded by its class and message."""
    error = outcome.error
    if isinstance(error, BaseException):
        return exception_text(error)
    if isinstance(error, str):
        return error_text(type(outcome).__name__, error)
    try:
        shown = repr(error)
    except BaseException:  # as exception_text: a hostile __repr__
        shown = "(the error could not be read)"
    return error_text(type(outcome).__name__, shown)


DEADLINE_ERROR = error_text("DeadlineExceeded", "deadline exceeded")
REFUSED_ERROR = error_text("OutcomeRefused", "the database refused this job's outcome")


def outcome_of(value: Any) -> tuple[Record, str | None]:
    """SPEC §6.1: None or a JSON-able value is Complete; Complete, Retry,
    Fail and Continue say so (a Continue's detail is its state, None to keep
    the last checkpoint). A value that cannot be stored is a Fail naming the
    problem: retrying the same code would produce it again. Never raises."""
    try:
        return _outcome_of(value)
    except Exception as error:
        return Record.FAIL, error_text(
            "OutcomeError", "the handler returned a value that cannot be recorded "
            f"({type(error).__name__})")


def _outcome_of(value: Any) -> tuple[Record, str | None]:
    if isinstance(value, Retry | Fail):
        return (Record.RETRY if isinstance(value, Retry) else Record.FAIL, outcome_error(value))
    if isinstance(value, Continue):
        if value.state is None:
            return (Record.CONTINUE, None)
        record, detail = _stored(Record.CONTINUE, value.state, "Continue state")
        if record is Record.CONTINUE and detail is not None and len(detail) > CHECKPOINT_LIMIT:
            # As ctx.checkpoint refuses it: a 20 MB state was saved and read
            # back by every later claim of the job.
            return Record.FAIL, error_text(
                "ValueError", f"Continue state is {len(detail):,} characters of JSON; at most "
                f"{CHECKPOINT_LIMIT:,} may be saved")
        return record, detail
    result = value.result if isinstance(value, Complete) else value
    if result is None:
        return (Record.COMPLETE, None)
    return _stored(Record.COMPLETE, result, "result")


def _stored(record: Record, value: Any, what: str) -> tuple[Record, str | None]:
    # jsonb holds neither NUL nor lone surrogates: one bad row must not sink the batch.
    text, problem = json_value_text(value)
    if text is None:
        return (Record.FAIL, error_text("ValueError", f"{what} {problem}"))
    return (record, text)
