"""The Lambda's invocation event (SPEC §8, §16): the keys that narrow a
tick, validated, and the correlation id that names its history row.

Anyone who may invoke the function writes the event, so nothing of it
reaches the database unchecked: a kind or queue PostgreSQL text cannot
hold is a malformed event; an id is sanitised, since a label must never
fail the tick it names.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
)

from tick.problems import brief
from tick.producer import NAME_LIMIT
from tick.text import printable, text_refusal

# What the history row keeps of a correlation id (SPEC §16).
CORRELATION_LIMIT = 200


def _storable(value: str) -> str:
    # A kind or queue PostgreSQL text cannot hold (NUL, a lone surrogate) or
    # longer than any job's: refused as a malformed event, before it reaches
    # the claim statement, rather than failing the tick there.
    refusal = text_refusal(value, NAME_LIMIT)
    if refusal is not None:
        raise ValueError(refusal)
    return value


NonEmpty = Annotated[StrictStr, Field(min_length=1), AfterValidator(_storable)]


def correlation_text(value: Any) -> str | None:
    """An id from the event or the context as the history row and the log
    lines hold it (SPEC §8, §16): NUL dropped, lone surrogates escaped, cut
    to 200 characters; None when nothing is left. AWS sets these ids, but
    anyone who can invoke the function sets the event: a label must not
    fail the tick it names."""
    if value is None:
        return None
    return printable(str(value))[:CORRELATION_LIMIT] or None


class TickEvent(BaseModel):
    """The keys of an invocation event that narrow the tick; others are ignored
    (AWS envelopes carry many). Types are strict (SPEC §8): `true`, `"3"` or
    `2.0` is not a `max_jobs`. An empty `kinds` or `queues` list is refused
    rather than guessed at (claim nothing? claim everything?): leave the key
    out to claim every kind or queue."""

    model_config = ConfigDict(extra="ignore")

    max_jobs: StrictInt | None = Field(default=None, gt=0, le=10_000_000)
    kinds: list[NonEmpty] | None = Field(default=None, min_length=1)
    queues: list[NonEmpty] | None = Field(default=None, min_length=1)
    # Set by awc's schedule Input (template.yaml).
    execution_id: str | None = None
    scheduled_time: str | None = None


def parse_event(event: Any) -> tuple[TickEvent, str | None]:
    """The validated event and its correlation id; `ValueError` if malformed."""
    if event is None:
        event = {}
    if not isinstance(event, dict):
        raise ValueError("invalid event: expected a JSON object")
    try:
        parsed = TickEvent.model_validate(event)
    except ValidationError as error:
        # Every place is the model's own (extra keys are ignored); the
        # problems are bounded, however many the event holds.
        raise ValueError(f"invalid event: {brief(error)}") from None
    correlation = correlation_text(parsed.execution_id)
    if correlation is None and event.get("source") == "aws.events":
        correlation = correlation_text(event.get("id")) if event.get("id") else None
    return parsed, correlation
