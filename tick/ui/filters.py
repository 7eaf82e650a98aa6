"""What a console request asks for, parsed and refused at the door (SPEC §19).

Every value a browser sends (query string or form) passes through here
before any query sees it: a state must be one of the five, a kind, queue or
driver a storable name, an id or cursor a positive 63-bit integer. Anything
else is a `BadInput` naming the field (never echoing the value), which the
app answers with a 400 page.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlencode

from tick.producer import NAME_LIMIT
from tick.text import text_refusal
from tick.words import DRIVERS, JOB_STATES, LIMIT_SCOPES

MAX_ID = 2**63 - 1


class BadInput(ValueError):
    """A request value the console cannot use; the message names the field."""


def _name(params: Mapping[str, str], field: str) -> str | None:
    value = params.get(field, "").strip()
    if not value:
        return None
    problem = text_refusal(value, NAME_LIMIT)
    if problem is not None:
        raise BadInput(f"{field} {problem}")
    return value


def _id(params: Mapping[str, str], field: str) -> int | None:
    value = params.get(field, "").strip()
    if not value:
        return None
    if not (value.isascii() and value.isdigit()) or len(value) > 19 or not 0 < int(value) <= MAX_ID:
        raise BadInput(f"{field} must be a positive whole number")
    return int(value)


def job_id(text: str) -> int:
    """A job id from a path."""
    found = _id({"id": text}, "id")
    if found is None:
        raise BadInput("id must be a positive whole number")
    return found


@dataclass(frozen=True)
class JobFilter:
    state: str | None = None
    kind: str | None = None
    queue: str | None = None
    id: int | None = None

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> JobFilter:
        state = params.get("state", "").strip().upper() or None
        if state is not None and state not in JOB_STATES:
            raise BadInput("state must be one of " + ", ".join(JOB_STATES))
        return cls(state, _name(params, "kind"), _name(params, "queue"), _id(params, "id"))

    def query(self, **more: object) -> str:
        """This filter (and `more`) as a query string, for links that keep it."""
        pairs = {"state": self.state, "kind": self.kind, "queue": self.queue, "id": self.id,
                 **more}
        return urlencode({k: v for k, v in pairs.items() if v is not None})

    @property
    def empty(self) -> bool:
        return self.state is None and self.kind is None and self.queue is None and self.id is None


def before(params: Mapping[str, str]) -> int | None:
    """The jobs page cursor: list jobs with ids below it."""
    return _id(params, "before")


def after(params: Mapping[str, str]) -> int | None:
    """The Newer link's cursor: the page of jobs just above this id."""
    return _id(params, "after")


PAYLOAD_SEARCH_CHARS = 2000


def payload_search(params: Mapping[str, str]) -> str | None:
    """The job list's payload search, `payload @> {...}` (SPEC §22): a JSON
    object of at most PAYLOAD_SEARCH_CHARS characters, as the JSON text
    jsonb reads; None when absent."""
    import json

    from tick.text import json_value_text

    value = params.get("payload", "").strip()
    if not value:
        return None
    if len(value) > PAYLOAD_SEARCH_CHARS:
        raise BadInput(f"payload is longer than {PAYLOAD_SEARCH_CHARS} characters")
    try:
        parsed = json.loads(value)
    except RecursionError:
        raise BadInput("payload is nested too deeply") from None
    except ValueError:
        raise BadInput("payload is not valid JSON") from None
    if not isinstance(parsed, dict):
        raise BadInput("payload must be a JSON object, such as {\"customer\": 42}")
    text, problem = json_value_text(parsed)
    if text is None:
        raise BadInput(f"payload {problem}")
    return text


def driver(params: Mapping[str, str]) -> str | None:
    value = params.get("driver", "").strip().lower() or None  # any case, as the CLI's
    if value is not None and value not in DRIVERS:
        raise BadInput("driver must be one of " + ", ".join(DRIVERS))
    return value


# An instant Python cannot hold, as PostgreSQL writes it (SPEC §4.2): a
# tick's started_at written by plain SQL may be one, and the page after it
# starts there.
_SERVER_INSTANT = re.compile(
    r"-?infinity|\d{5,6}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,6})?[+-]\d\d(:\d\d){0,2}"
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,6})?[+-]\d\d(:\d\d){0,2} BC")


def tick_cursor(params: Mapping[str, str]) -> tuple[datetime | str, int] | None:
    """The ticks page cursor, `<started_at>/<id>`: an ISO instant, or one
    Python cannot hold as the server's text (the query reads it)."""
    value = params.get("before", "").strip()
    if not value:
        return None
    at, _, tick = value.rpartition("/")
    if _SERVER_INSTANT.fullmatch(at):
        return at, job_id(tick)
    try:
        when = datetime.fromisoformat(at)
    except ValueError:
        raise BadInput("before is not a ticks page cursor") from None
    if when.tzinfo is None:
        raise BadInput("before is not a ticks page cursor")
    return when, job_id(tick)


def schedule_name(params: Mapping[str, str], field: str = "after") -> str:
    value = params.get(field, "")
    if not value:
        return ""
    problem = text_refusal(value, NAME_LIMIT)
    if problem is not None:
        raise BadInput(f"{field} {problem}")
    return value


def limit_target(params: Mapping[str, str], field: str = "target") -> tuple[str, str]:
    """A Limits page action's `kind:NAME` or `queue:NAME` (SPEC §22)."""
    scope, colon, name = params.get(field, "").partition(":")
    if not colon or scope not in LIMIT_SCOPES:
        raise BadInput(f"{field} must be kind:NAME or queue:NAME")
    found = _name({field: name}, field)
    if found is None or found != name:
        raise BadInput(f"{field} names no kind or queue")
    return scope, found


# What an action did, said on the page it leads to (SPEC §22): the verb by
# a fixed word, never text from the request.
DONE = {"retry": "retried: it is PENDING", "cancel": "cancelled", "discard": "discarded",
        "pause": "paused", "resume": "resumed", "trigger": "triggered",
        "paused-already": "was paused already"}


def notice(params: Mapping[str, str], path: str) -> str | None:
    """The line that says what the action just done did ("job 455
    cancelled"), from the redirect's `did` (and `job` or `target`); None
    for anything else."""
    verb = DONE.get(params.get("did", ""))
    if verb is None:
        return None
    try:
        if path.startswith("/limits"):
            scope, name = limit_target(params)
            return f"{scope} {name} {verb}"
        job = _id(params, "job")
    except BadInput:
        return None
    if path.startswith("/schedules/"):  # the page's own schedule
        return (f"schedule {path.removeprefix('/schedules/')} {verb}"
                + (f": job {job}" if job is not None else ""))
    return None if job is None else f"job {job} {verb}"
