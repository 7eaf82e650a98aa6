"""Global limits (SPEC §18): per kind or per queue, at most `max_running`
RUNNING jobs with unexpired leases and at most `rate` claims in any window of
`per_secs` seconds, across every tick, loop and Lambda at once. The claim
enforces them (`tick/sql/claim_limits.sql`, docs/decisions/0012); this
module sets, clears and lists them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tick.errors import FieldError
from tick.producer import INT4_MAX, KEY_LIMIT, NAME_LIMIT
from tick.statements import sql
from tick.text import text_refusal
from tick.words import KEY_LIMIT_SCOPES, LIMIT_SCOPES

if TYPE_CHECKING:
    import psycopg

# How far `list_limits` counts the jobs a limit holds back by default: the
# CLI and the gauge (README: "at most 100,000 counted"). The console passes
# its own display cap (SPEC §19).
COUNT_CAP = 100_000

LIST_COLUMNS = ("scope", "name", "max_running", "rate", "per_secs", "paused", "running",
                "window_claims", "held_back", "busiest")
# Per-key limits (SPEC §23): `key` (one key, or "*": every key its own
# limit) and `kind_key` (every key within one kind its own limit, set as
# `kind:NAME --per-key`).
KEY_SCOPES = KEY_LIMIT_SCOPES
# How many of a per-key limit's busiest keys `list_limits` shows: never every key.
BUSIEST = 20


class LimitError(FieldError):
    """A limit awc refuses, named by the field at fault; never quoting a value."""


@dataclass(frozen=True, slots=True)
class Limit:
    """One limit row."""

    scope: str  # one of tick.words.LIMIT_SCOPES or KEY_SCOPES
    name: str
    max_running: int | None = None
    rate: int | None = None
    per_secs: int | None = None


def parse_target(target: str) -> tuple[str, str]:
    """`kind:NAME` or `queue:NAME` as (scope, name), or `LimitError`."""
    scope, colon, name = target.partition(":") if isinstance(target, str) else ("", "", "")
    if not colon or scope not in LIMIT_SCOPES:
        raise LimitError("target", "must be kind:NAME or queue:NAME")
    return scope, _check_name(name)


def parse_limit_target(target: str, per_key: bool = False) -> tuple[str, str]:
    """`kind:NAME`, `queue:NAME`, `key:NAME`, `key:*`, or with `per_key`
    `kind:NAME` (each key within the kind), as (scope, name); or `LimitError`."""
    scope, colon, name = target.partition(":") if isinstance(target, str) else ("", "", "")
    if colon and scope == "key":
        if per_key:
            raise LimitError("--per-key", "goes with kind:NAME, not key:NAME")
        return "key", check_key_name(name)
    scope, name = parse_target(target)
    if per_key:
        if scope != "kind":
            raise LimitError("--per-key", "goes with kind:NAME")
        return "kind_key", name
    return scope, name


def check_key_name(name: str) -> str:
    """A key limit's name: a key as enqueue accepts it, or "*"."""
    if not name:
        raise LimitError("target", "names no key")
    refusal = text_refusal(name, KEY_LIMIT)
    if refusal is not None:
        raise LimitError("target", refusal)
    return name


def _check_name(name: str) -> str:
    if not name:
        raise LimitError("target", "names no kind or queue")
    refusal = text_refusal(name, NAME_LIMIT)  # as a kind's or a queue's (tick.producer)
    if refusal is not None:
        raise LimitError("target", refusal)
    return name


def _count(value: Any, field: str, low: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= INT4_MAX:
        raise LimitError(field, f"must be an integer between {low} and {INT4_MAX}")
    return value


def check_limit(limit: Limit) -> Limit:
    """`limit` if awc would store it, else `LimitError` naming the field."""
    if limit.scope in KEY_SCOPES:
        if limit.scope == "key":
            check_key_name(limit.name)
        else:
            _check_name(limit.name)
    elif limit.scope not in LIMIT_SCOPES:
        raise LimitError("target", "must be kind:NAME or queue:NAME")
    else:
        _check_name(limit.name)
    _count(limit.max_running, "max_running", 0)
    _count(limit.rate, "rate", 1)
    _count(limit.per_secs, "per_secs", 1)
    if (limit.rate is None) != (limit.per_secs is None):
        raise LimitError("rate and per_secs", "go together: give both or neither")
    if limit.max_running is None and limit.rate is None:
        raise LimitError("max_running or rate", "is needed: a limit with neither limits nothing")
    return limit


def set_limit(conn: psycopg.Connection[Any], limit: Limit) -> None:
    """Store `limit`, replacing that kind's or queue's earlier one."""
    check_limit(limit)
    conn.execute(sql("upsert_limit"), {"scope": limit.scope, "name": limit.name,
                                       "max_running": limit.max_running, "rate": limit.rate,
                                       "per_secs": limit.per_secs})


def clear_limit(conn: psycopg.Connection[Any], scope: str, name: str) -> bool:
    """Remove a limit; False if there was none."""
    return conn.execute(sql("delete_limit"), {"scope": scope, "name": name}).fetchone() is not None


def list_limits(conn: psycopg.Connection[Any], cap: int = COUNT_CAP) -> list[dict[str, Any]]:
    """Every limit with its use now: `running`, `window_claims`, `held_back`,
    the counts stopping at `cap` (`running` at the limit, if that is more)."""
    rows = conn.execute(sql("list_limits"), {"cap": cap, "busiest": BUSIEST}).fetchall()
    return [dict(zip(LIST_COLUMNS, row, strict=True)) for row in rows]


def pause(conn: psycopg.Connection[Any], scope: str, name: str) -> bool:
    """Hold a kind or queue back (SPEC §22): max_running 0, the rate kept,
    the earlier max_running remembered for `resume`. False if it was paused
    already (nothing changes)."""
    _check_name(name)
    return conn.execute(sql("pause_limit"), {"scope": scope, "name": name}).fetchone() is not None


def resume(conn: psycopg.Connection[Any], scope: str, name: str) -> str | None:
    """Release a pause (SPEC §22): "restored" (the max_running before the
    pause is back), "removed" (the limit existed only for the pause), or
    None when `pause` had not paused it (a `limits set --max-running 0` is
    the operator's own limit: `limits set` or `limits clear` change it)."""
    row = conn.execute(sql("resume_limit"), {"scope": scope, "name": name}).fetchone()
    return None if row is None else str(row[0])
