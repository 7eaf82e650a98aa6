"""Retention of completed jobs by whole parts (SPEC §24, docs/decisions/0030).

A completed job is moved by its fenced completion into the current one of
eight finished parts (`awc.jobs_done_0` .. `_7`, which inherit `awc.jobs`).
Retention never deletes them one by one: once the current part has taken
completions for a seventh of the retention and the next part's rows are all
older than the retention, the next part is emptied with TRUNCATE and becomes
current. That costs no DELETE, leaves no dead row and needs no VACUUM, so it
does not care whether a long transaction holds the xmin horizon back. A
completed parent that a child not yet final still needs (SPEC §20) is first
carried into the current part, and the edges of the children that go are
deleted with them.

TRUNCATE needs the part to itself. A `pg_dump` or a long report reading the
history holds it, and a TRUNCATE waiting in the lock queue would make every
completion wait behind it (each completion statement names every part), so
it waits 100 ms at most and the rotation is left to the next pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tick.statements import sql

if TYPE_CHECKING:
    import psycopg

PARTS = 8


def part_table(slot: int) -> str:
    """The name of finished part `slot`: a fixed set, never user input."""
    if not 0 <= slot < PARTS:
        raise ValueError(f"no finished part {slot}")
    return f"awc.jobs_done_{slot}"


def rotate(conn: psycopg.Connection[Any], after_secs: float, lock_key: int) -> int | None:
    """Empty the next finished part and make it current, when retention
    allows (see the module's text). Returns the completed jobs it removed,
    or None when no part was due or the part was busy. `lock_key` is the
    prune's advisory lock: one process rotates at a time."""
    import psycopg
    from psycopg import sql as ident

    with conn.transaction():
        due = conn.execute(sql("done_part_due"), {"after_secs": after_secs}).fetchone()
    if due is None:
        return None
    slot = int(due[0])
    table = ident.SQL(part_table(slot))  # fixed names: see part_table
    # Counted before the lock (the part takes no completion while it is not
    # current), so the TRUNCATE holds its lock for as short as it can.
    row = conn.execute(ident.SQL("SELECT count(*) FROM {}").format(table)).fetchone()
    removed = int(row[0]) if row else 0
    try:
        with conn.transaction():
            taken = conn.execute(sql("try_lock"), {"key": lock_key}).fetchone()
            if not (taken and taken[0]):
                return None
            again = conn.execute(sql("done_part_due"), {"after_secs": after_secs}).fetchone()
            if again is None or int(again[0]) != slot:
                return None  # another process rotated meanwhile
            conn.execute("SET LOCAL lock_timeout = '100ms'")
            names = {"part": table, "current": ident.SQL(part_table((slot - 1) % PARTS))}
            forget = ident.SQL(sql("forget_done_edges")).format(**names)
            conn.execute(forget, {"parents": False, "carried": []})  # before the lock
            # The part's lock, then what to carry: a producer naming a parent
            # in the part holds its row until its commit, and a carry read
            # before that commit missed the new child, so the TRUNCATE, let
            # through by the commit, took the parent it needs.
            conn.execute(ident.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(table))
            carried = [int(r[0]) for r in conn.execute(
                ident.SQL(sql("carry_done_parents")).format(**names))]
            conn.execute(forget, {"parents": True, "carried": carried})
            conn.execute(ident.SQL("TRUNCATE {}").format(table))
            conn.execute(sql("leave_done_part"))
            conn.execute(sql("take_done_part"), {"slot": slot})
    except psycopg.errors.LockNotAvailable:
        return None
    return removed - len(carried)
