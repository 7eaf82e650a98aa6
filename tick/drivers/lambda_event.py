"""The Lambda's invocation event (SPEC §8, §16): the keys that narrow a
tick, validated, and the correlation id that names its history row.

Anyone who may invoke the function writes the event, so nothing of it
reaches the database unchecked: a kind or queue PostgreSQL text cannot
hold is a malformed event; an id is sanitised, since a label must never
fail the tick it names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tick.problems import counted
from tick.producer import NAME_LIMIT
from tick.text import printable, text_refusal

# What the history row keeps of a correlation id (SPEC §16).
CORRELATION_LIMIT = 200
MAX_JOBS_LIMIT = 10_000_000


def correlation_text(value: Any) -> str | None:
    """An id from the event or the context as the history row and the log
    lines hold it (SPEC §8, §16): NUL dropped, lone surrogates escaped, cut
    to 200 characters; None when nothing is left. AWS sets these ids, but
    anyone who can invoke the function sets the event: a label must not
    fail the tick it names."""
    if value is None:
        return None
    return printable(str(value))[:CORRELATION_LIMIT] or None


@dataclass(frozen=True, slots=True)
class TickEvent:
    """The keys of an invocation event that narrow the tick; others are ignored
    (AWS envelopes carry many). Types are strict (SPEC §8): `true`, `"3"` or
    `2.0` is not a `max_jobs`. An empty `kinds` or `queues` list is refused
    rather than guessed at (claim nothing? claim everything?): leave the key
    out to claim every kind or queue. Checked by hand, not by a pydantic
    model: building the model cost every cold start of the function 80 ms
    (decision 0040); the messages are the ones the model gave."""

    max_jobs: int | None = None
    kinds: list[str] | None = None
    queues: list[str] | None = None
    # Set by awc's schedule Input (template.yaml).
    execution_id: str | None = None
    scheduled_time: str | None = None


def _max_jobs(value: Any, problems: list[str]) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        problems.append("max_jobs: Input should be a valid integer")
    elif value <= 0:
        problems.append("max_jobs: Input should be greater than 0")
    elif value > MAX_JOBS_LIMIT:
        problems.append(f"max_jobs: Input should be less than or equal to {MAX_JOBS_LIMIT}")
    else:
        return value
    return None


def _names(key: str, value: Any, problems: list[str]) -> list[str] | None:
    """A list of at least one kind or queue name, each text PostgreSQL can
    hold and no longer than any job's: else refused as a malformed event,
    before it reaches the claim statement, rather than failing the tick there."""
    if value is None:
        return None
    if not isinstance(value, list):
        problems.append(f"{key}: Input should be a valid list")
        return None
    if not value:
        problems.append(f"{key}: List should have at least 1 item after validation, not 0")
        return None
    for index, name in enumerate(value):
        if not isinstance(name, str):
            problems.append(f"{key}.{index}: Input should be a valid string")
        elif not name:
            problems.append(f"{key}.{index}: String should have at least 1 character")
        else:
            refusal = text_refusal(name, NAME_LIMIT)
            if refusal is not None:
                problems.append(f"{key}.{index}: {refusal}")
    return list(value)


def _text(key: str, value: Any, problems: list[str]) -> str | None:
    if value is None or isinstance(value, str):
        return value
    problems.append(f"{key}: Input should be a valid string")
    return None


def parse_event(event: Any) -> tuple[TickEvent, str | None]:
    """The validated event and its correlation id; `ValueError` if malformed,
    naming the first problems and counting the rest, never quoting the input:
    anyone who may invoke the function writes the event (100,000 bad kinds
    made a 5 MB error)."""
    if event is None:
        event = {}
    if not isinstance(event, dict):
        raise ValueError("invalid event: expected a JSON object")
    problems: list[str] = []
    parsed = TickEvent(
        max_jobs=_max_jobs(event.get("max_jobs"), problems),
        kinds=_names("kinds", event.get("kinds"), problems),
        queues=_names("queues", event.get("queues"), problems),
        execution_id=_text("execution_id", event.get("execution_id"), problems),
        scheduled_time=_text("scheduled_time", event.get("scheduled_time"), problems),
    )
    if problems:
        raise ValueError("invalid event: " + counted(problems, len(problems)))
    correlation = correlation_text(parsed.execution_id)
    if correlation is None and event.get("source") == "aws.events":
        correlation = correlation_text(event.get("id")) if event.get("id") else None
    return parsed, correlation
