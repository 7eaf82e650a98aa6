"""Claims as the engine makes them, for the cursor's tests (SPEC §24,
docs/decisions/0027) and the fair claim's (SPEC §23, decision 0034): one
claim through `tick.queue.round_trip` from a `Cursor`, jobs enqueued by
plain SQL, what is still ready, and what a claim costs in buffers."""

from __future__ import annotations

import time
from typing import Any

import psycopg

from tick.engine.cursor import Cursor
from tick.queue import NO_CURSOR, ClaimRequest, Writes, array_literal, new_nonce, round_trip
from tick.statements import sql


def claim(conn: psycopg.Connection[Any], cursor: Cursor, n: int,
          queues: list[str] | None = None) -> list[int]:
    """One claim of up to `n` jobs from `cursor`, moved on as the engine does."""
    request = ClaimRequest(slots=[f"s{i}" for i in range(n)], lease_secs=60.0, cap_secs=60.0,
                           leases_json="{}", kinds=None, queues=queues,
                           cursor=cursor.params(time.monotonic()))
    done = round_trip(conn, Writes(), request)
    cursor.moved(done.mark, time.monotonic())
    return [row.id for row in done.claimed]


def enqueue(conn: psycopg.Connection[Any], n: int, **columns: Any) -> list[int]:
    names = ", ".join(["kind", *columns])
    values = ", ".join(["'noop'", *[f"%({c})s" for c in columns]])
    return [row[0] for row in conn.execute(
        f"INSERT INTO awc.jobs ({names}) SELECT {values} FROM generate_series(1, %(n)s) "
        "RETURNING id", {"n": n, **columns}).fetchall()]


def pending(conn: psycopg.Connection[Any]) -> set[int]:
    return {row[0] for row in conn.execute(
        "SELECT id FROM awc.jobs WHERE state = 'PENDING' AND run_at <= now()").fetchall()}


def explained(conn: psycopg.Connection[Any], statement: str,
              params: dict[str, Any]) -> dict[str, Any]:
    """The top node of the named statement's plan, run with `params` under
    the engine's pinned plans (EXPLAIN ANALYZE, BUFFERS), rolled back."""
    with conn.transaction(force_rollback=True):
        conn.execute(sql("pin_plans"))
        row = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql(statement),
                           params).fetchone()
    assert row is not None
    top: dict[str, Any] = row[0][0]["Plan"]
    return top


def read(top: dict[str, Any]) -> int:
    """The shared buffers a plan's top node touched."""
    return int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))


def buffers(conn: psycopg.Connection[Any], cursor: Cursor, n: int) -> int:
    """Shared buffers a claim of `n` from `cursor` touches, measured, rolled back."""
    params = {"slots": [f"s{i}" for i in range(n)], "lease": 60.0, "cap": 60.0,
              "leases": "{}", "kinds": None, "queues": None, "queue": None, "nonce": new_nonce(),
              **cursor.params(time.monotonic())}
    return read(explained(conn, "claim_jobs", params))


def claim_fairly(conn: psycopg.Connection[Any], cursor: Cursor, n: int,
                 kinds: list[str] | None = None) -> list[int]:
    """One claim of up to `n` jobs from `cursor`, moved on as the engine does
    (tick/engine/claims.py): the fair claim first; if it cannot claim (no
    keyed job ready), the gate and the plain walk at once."""
    fair = True
    while True:
        request = ClaimRequest(slots=[f"s{i}" for i in range(n)], lease_secs=60.0,
                               cap_secs=60.0, leases_json="{}", kinds=kinds, queues=None,
                               cursor=cursor.params(time.monotonic()), fair=fair)
        done = round_trip(conn, Writes(), request)
        cursor.moved(done.mark, time.monotonic())
        cursor.key_pass = done.fair.spread
        if done.fair.key is not None:
            cursor.key_after = done.fair.key
        if done.claimed or not done.fair.again or fair == done.fair.next:
            return [row.id for row in done.claimed]
        fair = done.fair.next


def enqueue_keyed(conn: psycopg.Connection[Any], n: int, key: str | None,
                  **columns: Any) -> list[int]:
    """`n` no-op jobs of `key` (None: without one), by plain SQL; their ids."""
    names = ", ".join(["kind", "key", *columns])
    values = ", ".join(["'noop'", "%(key)s", *[f"%({c})s" for c in columns]])
    return [row[0] for row in conn.execute(
        f"INSERT INTO awc.jobs ({names}) SELECT {values} FROM generate_series(1, %(n)s) "
        "ORDER BY 1 RETURNING id", {"n": n, "key": key, **columns}).fetchall()]


def keys_of(conn: psycopg.Connection[Any], ids: list[int]) -> list[str | None]:
    found = dict(conn.execute("SELECT id, key FROM awc.jobs WHERE id = ANY (%s)",
                              (ids,)).fetchall())
    return [found[i] for i in ids]


def fair_params(slots: int, key_after: str | None, *, kinds: list[str] | None = None,
                key_pass: bool = True) -> dict[str, Any]:
    """The parameters of one fair claim statement of `slots` slots from the
    key cursors `key_after`, as `tick.queue.round_trip` sends them."""
    return {**NO_CURSOR, "nonce": new_nonce(), "queue": None, "key_after": key_after,
            "key_pass": key_pass, "slots": array_literal([f"s{i}" for i in range(slots)]),
            "lease": 60.0, "cap": 60.0, "leases": "{}", "kinds": kinds, "queues": None}
