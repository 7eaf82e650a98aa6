"""The COPY path of `enqueue_many` (SPEC §4.3, §14): the rows of a batch
without dedupe keys stream into awc.jobs in COPY's text format, built
directly, after `tick.producer` checked every field."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tick.statements import sql

if TYPE_CHECKING:
    import psycopg

# Rows per write: libpq sends what the socket takes of one chunk (the
# connection is non-blocking) while the next is built; the server ingests as
# the rows arrive.
COPY_CHUNK = 1000


def copy_many(conn: psycopg.Connection[Any], shapes: list[tuple[Any, ...]], payloads: list[str],
              traces: list[str | None] | None) -> list[int]:
    """COPY the jobs in (no dedupe keys in the batch), their fields and
    payloads as the producer checked them: reserve their ids in one
    statement, then stream the rows. Jobs without `run_at` take the column
    default (the server's now()), so they go in a COPY without that column;
    the trace context column is sent only when a job has one (SPEC §21)."""
    from itertools import repeat

    row = conn.execute(sql("reserve_job_ids"), {"n": len(shapes)}).fetchone()
    assert row is not None
    ids: list[int] = row[0]
    later_rows = []
    columns = "id, kind, payload, max_attempts, priority, queue, timeout_secs, key" + (
        "" if traces is None else ", trace_context")
    with conn.cursor() as cur:
        # psycopg's own writer, from this thread: its queued writer's thread
        # waited for the interpreter's lock behind the formatting, and the
        # rows reached the server later (decision 0006).
        with cur.copy(f"COPY awc.jobs ({columns}) FROM STDIN") as copy:
            lines: list[str] = []
            # The text around each payload, once per shape (the jobs of a
            # batch share a few): keyed by the shape tuple's identity, which
            # the producer's field check shares between jobs of the same
            # checked values (`shapes`, one per job).
            around: dict[int, tuple[str, str]] = {}
            # ids and shapes are of one length; with no column, every trace is None.
            each_trace = repeat(None) if traces is None else traces
            for job_id, payload, trace, shape in zip(ids, payloads, each_trace, shapes,
                                                     strict=False):
                kind, max_attempts, run_at, priority, queue, _, timeout, key = shape
                if run_at is not None:
                    later_rows.append((job_id, kind, payload, int(max_attempts), int(priority),
                                       queue, timeout, key, trace, run_at))
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
                        f"{fair}")
                tail = "" if traces is None else (
                    "\t\\N" if trace is None else f"\t{copy_text(trace)}")
                lines.append(f"{job_id}{text[0]}{copy_text(payload)}{text[1]}{tail}\n")
                if len(lines) == COPY_CHUNK:
                    copy.write("".join(lines))
                    lines = []
            if lines:
                copy.write("".join(lines))
        if later_rows:
            with cur.copy("COPY awc.jobs (id, kind, payload, max_attempts, priority, queue, "
                          "timeout_secs, key, trace_context, run_at) FROM STDIN") as copy:
                for values in later_rows:
                    copy.write_row(values)
    return ids


_COPY_SPECIAL = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def copy_text(value: str) -> str:
    """`value` escaped for COPY's text format (backslash, tab, newline, CR)."""
    if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
        return value.translate(_COPY_SPECIAL)
    return value
