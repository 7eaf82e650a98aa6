"""The COPY path of `enqueue_many` (SPEC §4.3, §14): the rows of a batch
without dedupe keys stream into awc.jobs in COPY's text format, built
directly, each job checked by `tick.producer`'s field check as it goes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tick.statements import sql

if TYPE_CHECKING:
    import psycopg

# The producer's field check of one job (its index, the job): the job's
# checked fields and its payload as JSON (`tick.producer.FieldCheck`).
Check = Callable[[int, Mapping[str, Any]], tuple[tuple[Any, ...], str]]

# A job of a graph as it is inserted (SPEC §20, tick.parents): how many
# parents it waits for, whether it is a parent, its on_parent_failure. In a
# COPY, these columns follow the others.
GraphMark = tuple[int, bool, str]
GRAPH_COLUMNS = ", waiting, has_children, on_parent_failure"

# Rows per write: libpq sends what the socket takes of one chunk (the
# connection is non-blocking) while the next is built; the server ingests as
# the rows arrive.
COPY_CHUNK = 1000


def copy_many(conn: psycopg.Connection[Any], batch: Sequence[Mapping[str, Any]],
              traces: list[str | None] | None, check: Check,
              marks: Sequence[GraphMark] | None = None) -> list[int]:
    """COPY the jobs in (no dedupe keys in the batch): reserve their ids in
    one statement, then check (`check`: each job's fields as the producer
    checks them, and its payload as JSON) and stream the rows a chunk at a
    time. Jobs without `run_at` take the column default (the server's now()),
    so they go in a COPY without that column; the trace context column is
    sent only when a job has one (SPEC §21); a graph's marks (waiting,
    has_children, on_parent_failure: SPEC §20), only for a graph.

    A job `check` refuses ends the COPY: inside the caller's transaction,
    the COPY runs in a savepoint, rolled back then, so the transaction is
    as it was before the call; without one, the COPY is its own."""
    from contextlib import nullcontext

    from psycopg.pq import TransactionStatus

    row = conn.execute(sql("reserve_job_ids"), {"n": len(batch)}).fetchone()
    assert row is not None
    ids: list[int] = sorted(row[0])
    # Reserving the ids began the caller's transaction, if it has one.
    held = conn.info.transaction_status == TransactionStatus.INTRANS
    with conn.transaction() if held else nullcontext(), conn.cursor() as cur:
        later_rows = _copy_rows(cur, batch, ids, traces, check, marks)
        if later_rows:
            with cur.copy("COPY awc.jobs (id, kind, payload, max_attempts, priority, queue, "
                          "timeout_secs, key, trace_context, run_at"
                          + ("" if marks is None else GRAPH_COLUMNS) + ") FROM STDIN") as copy:
                for values in later_rows:
                    copy.write_row(values)
    return ids


def _copy_rows(cur: psycopg.Cursor[Any], batch: Sequence[Mapping[str, Any]], ids: list[int],
               traces: list[str | None] | None, check: Check,
               marks: Sequence[GraphMark] | None) -> list[tuple[Any, ...]]:
    """The COPY of the jobs without `run_at`, checked a chunk ahead of the
    server; the rows of the others, checked, for a COPY of their own."""
    from itertools import repeat

    later_rows = []
    columns = "id, kind, payload, max_attempts, priority, queue, timeout_secs, key" + (
        "" if traces is None else ", trace_context") + ("" if marks is None else GRAPH_COLUMNS)
    # psycopg's own writer, from this thread: its queued writer's thread
    # waited for the interpreter's lock behind the formatting, and the rows
    # reached the server later (decision 0006).
    with cur.copy(f"COPY awc.jobs ({columns}) FROM STDIN") as copy:
        lines: list[str] = []
        # The text around each payload, once per shape (the jobs of a batch
        # share a few): keyed by the shape tuple's identity, which the
        # field check shares between jobs of the same checked values. The
        # entry holds the tuple too: an identity is unique only while its
        # object lives, and a shape the check does not share would die with
        # its job, and its identity come back for another job's.
        around: dict[int, tuple[str, str, tuple[Any, ...]]] = {}
        # ids and jobs are of one length; with no column, every trace is None
        # and every mark too.
        each_trace = repeat(None) if traces is None else traces
        each_mark = repeat(None) if marks is None else marks
        for n, (job_id, job, trace, mark) in enumerate(
                zip(ids, batch, each_trace, each_mark, strict=False)):
            shape, payload = check(n, job)
            kind, max_attempts, run_at, priority, queue, _, timeout, key = shape
            if run_at is not None:
                later_rows.append((job_id, kind, payload, int(max_attempts), int(priority),
                                   queue, timeout, key, trace, run_at, *(mark or ())))
                continue
            text = around.get(id(shape))
            if text is None:
                # COPY's text format, built directly: one line per job (\N:
                # null; repr() of a checked finite float is a number COPY
                # reads back).
                limit = "\\N" if timeout is None else repr(float(timeout))
                fair = "\\N" if key is None else copy_text(key)
                text = around[id(shape)] = (
                    f"\t{copy_text(kind)}\t",
                    f"\t{int(max_attempts)}\t{int(priority)}\t{copy_text(queue)}\t{limit}\t"
                    f"{fair}", shape)
            tail = "" if traces is None else (
                "\t\\N" if trace is None else f"\t{copy_text(trace)}")
            if mark is not None:  # a count, a boolean and 'cancel' or 'run': nothing to escape
                tail += f"\t{int(mark[0])}\t{'t' if mark[1] else 'f'}\t{mark[2]}"
            lines.append(f"{job_id}{text[0]}{copy_text(payload)}{text[1]}{tail}\n")
            if len(lines) == COPY_CHUNK:
                copy.write("".join(lines))
                lines = []
        if lines:
            copy.write("".join(lines))
    return later_rows


_COPY_SPECIAL = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def copy_text(value: str) -> str:
    """`value` escaped for COPY's text format (backslash, tab, newline, CR)."""
    if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
        return value.translate(_COPY_SPECIAL)
    return value
