"""Values PostgreSQL stores but Python cannot load as psycopg would (SPEC §4.2).

A producer may write `infinity`, `-infinity`, a year after 9999 or a date BC
into any timestamptz column, or a jsonb value nested deeper than Python's
decoder goes; psycopg's own loaders then raise for the whole row. Loaders
here replace them where awc reads such values:

- `ClampedTimestamptz`, for rules that compare (a workspace that "never
  expires" is later than any now): out-of-range instants become
  `datetime.max` or `datetime.min`, which order the same way.
- `ShownTimestamptz`, for operator output: such an instant is shown as the
  server wrote it (`infinity`, `10000-01-01 00:00:00+00`), never altered.
- `ShownJsonb`, for operator output: a value too deep to decode is shown as
  its JSON text.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from psycopg.errors import DataError
from psycopg.types.datetime import TimestamptzLoader
from psycopg.types.json import JsonbLoader

if TYPE_CHECKING:
    import psycopg
    from psycopg.abc import Buffer

LATEST = datetime.max.replace(tzinfo=UTC)
EARLIEST = datetime.min.replace(tzinfo=UTC)


def _is_early(text: str) -> bool:
    return text.startswith("-") or text.endswith("BC")


class ClampedTimestamptz(TimestamptzLoader):
    """Out-of-range instants as `datetime.max` / `datetime.min` (UTC)."""

    def load(self, data: Buffer) -> datetime:
        try:
            return super().load(data)
        except DataError:
            return EARLIEST if _is_early(bytes(data).decode()) else LATEST


class ShownTimestamptz(TimestamptzLoader):
    """Out-of-range instants as the server's own text."""

    def load(self, data: Buffer) -> Any:
        try:
            return super().load(data)
        except DataError:
            return bytes(data).decode()


def shown_json(text: str) -> Any:
    """JSON text as Python values, or the text itself when nested deeper
    than Python's decoder goes (jsonb takes thousands of levels)."""
    try:
        return json.loads(text)
    except RecursionError:
        return text


class ShownJsonb(JsonbLoader):
    """jsonb as Python values, or as its JSON text when nested too deeply."""

    def load(self, data: Buffer) -> Any:
        return shown_json(bytes(data).decode())


def clamp_timestamps(conn: psycopg.Connection[Any]) -> None:
    """Read every timestamptz on `conn` with `ClampedTimestamptz`."""
    conn.adapters.register_loader("timestamptz", ClampedTimestamptz)


def for_operators(conn: psycopg.Connection[Any]) -> None:
    """Read timestamps and jsonb on `conn` as operator output shows them."""
    conn.adapters.register_loader("timestamptz", ShownTimestamptz)
    conn.adapters.register_loader("jsonb", ShownJsonb)
