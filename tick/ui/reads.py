"""What the console's pages read (SPEC §19), every query bounded.

Counts stop at `CAP` (a page says "10,000+"), the table's size is the
planner's estimate, lists are pages of at most `PAGE` rows found by index,
and the job list reads at most `WINDOW` jobs per page whatever its filter
(docs/decisions/0013). Each function takes a connection and returns plain
data for a template.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tick.statements import sql
from tick.text import indented_json
from tick.ui.filters import JobFilter
from tick.words import DEAD_STATES, JOB_STATES

if TYPE_CHECKING:
    import psycopg

CAP = 10_000
PAGE = 50
WINDOW = 20_000
GROUPS = 20  # kinds and queues the overview lists
NAMES = 100  # kinds and queues the job filters offer
DEAD_LETTERS = 10
SHOWN_CHARS = 100_000  # of a payload, result or checkpoint on the job page
LIST_COLUMNS = ("id", "kind", "state", "queue", "priority", "attempts", "max_attempts",
                "progress", "continues", "run_at", "updated_at", "last_error")


def _rows(cur: psycopg.Cursor[Any]) -> list[dict[str, Any]]:
    columns = [c.name for c in cur.description or ()]
    return [dict(zip(columns, row, strict=True)) for row in cur.fetchall()]


def overview(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    # Eight short statements, pipelined: one exchange with the server, not eight.
    with conn.pipeline():
        cur = {name: conn.execute(sql(name), params) for name, params in (
            ("console_state_counts", {"cap": CAP + 1}),
            ("console_table_estimate", None),
            ("oldest_ready_age", None),
            ("console_jobs_by_kind", {"cap": CAP + 1, "groups": GROUPS}),
            ("console_jobs_by_queue", {"cap": CAP + 1, "groups": GROUPS}),
            ("console_throughput", None),
            ("console_last_ticks", None),
            ("console_dead_letters", {"limit": DEAD_LETTERS}))}
    states = dict(cur["console_state_counts"].fetchall())
    estimate = cur["console_table_estimate"].fetchone()
    age = cur["oldest_ready_age"].fetchone()
    counted = {state: int(states.get(state, 0)) for state in JOB_STATES}
    return {
        "states": counted,
        # A table never analyzed has no estimate: at least what was counted.
        "table_estimate": max(int(estimate[0]) if estimate else 0, sum(counted.values())),
        "oldest_ready_age_s": None if age is None or age[0] is None else float(age[0]),
        "by_kind": _grouped(cur["console_jobs_by_kind"]),
        "by_queue": _grouped(cur["console_jobs_by_queue"]),
        "groups": GROUPS,
        "cap": CAP,
        # States with more jobs than the cap are counted per kind and queue
        # among the first CAP read (console_jobs_by_kind): lower bounds.
        "sampled": [state for state, n in counted.items() if n > CAP and state != "PENDING"],
        "hours": [{"hour": h, "completed": int(c), "failed": int(f), "retried": int(r)}
                  for h, c, f, r in cur["console_throughput"].fetchall()],
        "last_ticks": _rows(cur["console_last_ticks"]),
        "dead_letters": _rows(cur["console_dead_letters"]),
    }


def _grouped(cur: psycopg.Cursor[Any]) -> list[dict[str, Any]]:
    rows = _rows(cur)
    for row in rows:
        # A group's PENDING jobs are read up to the cap, then split: past
        # it, ready and scheduled are counts among those read.
        row["pending_sampled"] = row["ready"] + row["scheduled"] > CAP
    return rows


@dataclass(frozen=True)
class JobPage:
    rows: list[dict[str, Any]]
    next_before: int | None  # the cursor of the next (older) page, if any
    scanned: int | None  # jobs the window read (None: read by index, no window)
    scanned_to: int | None
    newer_after: int | None = None  # the cursor of the Newer page, if there may be one
    matches: int | None = None  # matching jobs among `counted` (the window, or the cap)
    counted: int | None = None


def jobs(conn: psycopg.Connection[Any], where: JobFilter, before: int | None, *,
         after: int | None = None, payload: str | None = None) -> JobPage:
    """A page of jobs matching `where` (and containing `payload`, a JSON
    object's text), newest first: with ids below `before`, or, for the
    Newer link, the page just above `after`. Each read is bounded as the
    unfiltered list's is (docs/decisions/0013)."""
    if where.id is not None:
        found = _rows(conn.execute(sql("console_job_listed"), {
            "id": where.id, "state": where.state, "kind": where.kind, "queue": where.queue}))
        return JobPage(_listed(found), None, None, None)
    newer = after is not None
    params = {"before": before if before is not None else MAX_ID, "after": after or 0,
              "newer": newer, "limit": PAGE + 1, "state": where.state, "kind": where.kind,
              "queue": where.queue, "payload": payload}
    if where.state in DEAD_STATES:
        rows = sorted(_rows(conn.execute(sql("console_dead_jobs"), params)),
                      key=lambda r: r["id"], reverse=not newer)
        more = len(rows) > PAGE
        rows = sorted(rows[:PAGE], key=lambda r: r["id"], reverse=True)
        count = conn.execute(sql("console_dead_count"), {**params, "cap": CAP}).fetchone()
        matches, counted = (int(count[0]), int(count[1])) if count else (0, 0)
        if newer:
            return JobPage(_listed(rows), rows[-1]["id"] if rows else (after or 0) + 1, None,
                           None, rows[0]["id"] if more else None, matches, counted)
        return JobPage(_listed(rows), rows[-1]["id"] if more else None, None, None,
                       _newer(rows, before), matches, counted)
    rows = _rows(conn.execute(sql("console_jobs"), {**params, "window": WINDOW}))
    scanned = int(rows[0]["scanned"]) if rows else 0
    scanned_to = rows[0]["scanned_to"] if rows else None
    matches = int(rows[0]["matches"]) if rows else 0
    found = [r for r in rows if r["id"] is not None]
    # The window ran out before a page filled: continue past it, unless it
    # reached the end of the table (the oldest job, or the newest).
    exhausted = scanned < WINDOW
    if newer:
        shown = found[-PAGE:]  # the PAGE just above `after`
        onward = (shown[0]["id"] if len(found) > PAGE
                  else None if exhausted or scanned_to is None else int(scanned_to))
        return JobPage(_listed(shown), shown[-1]["id"] if shown else (after or 0) + 1, scanned,
                       scanned_to, onward, matches, scanned)
    if len(found) > PAGE:
        return JobPage(_listed(found[:PAGE]), found[PAGE - 1]["id"], scanned, scanned_to,
                       _newer(found, before), matches, scanned)
    return JobPage(_listed(found), None if exhausted or scanned_to is None else int(scanned_to),
                   scanned, scanned_to, _newer(found, before), matches, scanned)


MAX_ID = 2**63 - 1


def _newer(shown: list[dict[str, Any]], before: int | None) -> int | None:
    """The Newer link's cursor of a page read below `before`: none on the
    first page; above its newest row, or below `before` when it is empty."""
    if before is None:
        return None
    return int(shown[0]["id"]) if shown else before - 1


def job_names(conn: psycopg.Connection[Any]) -> tuple[list[str], list[str]]:
    """The kinds and queues the job filters offer (bounded: console_job_names)."""
    row = conn.execute(sql("console_job_names"), {"cap": CAP, "groups": NAMES}).fetchone()
    return (list(row[0]), list(row[1])) if row else ([], [])


def _listed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: r[k] for k in LIST_COLUMNS} for r in rows]


JOB_COLUMNS = ("id", "kind", "state", "queue", "priority", "attempts", "max_attempts",
               "run_at", "locked_by", "locked_until", "dedupe_key", "key", "timeout_secs",
               "created_at",
               "updated_at", "started_at", "finished_at", "progress", "continues",
               "last_error", "payload", "result", "checkpoint", "errors")


def job(conn: psycopg.Connection[Any], job_id: int) -> dict[str, Any] | None:
    """One job in full, its JSON as indented text (cut at `SHOWN_CHARS`),
    with the schedule fire that made it; None when there is no such job."""
    row = conn.execute(sql("console_job"), {"id": job_id, "chars": SHOWN_CHARS + 1}).fetchone()
    if row is None:
        return None
    found = dict(zip(JOB_COLUMNS, row, strict=True))
    for field in ("payload", "result", "checkpoint"):
        found[field] = _pretty(found[field])
    found["errors"] = _errors(found["errors"])
    from tick.admin import job_family

    # Parents and children with their states (SPEC §20): a bounded read.
    found["family"] = job_family(conn, job_id)
    fire = conn.execute(sql("console_job_fire"), {"id": job_id}).fetchone()
    found["fire"] = None if fire is None else dict(
        zip(("schedule", "fire_at", "status", "recorded_at"), fire, strict=True))
    return found


def _errors(text: str) -> list[dict[str, Any]]:
    """The error history as console_job.sql read it (newest first, bounded
    by the statement), each `at` an instant when it reads as one."""
    entries: list[dict[str, Any]] = json.loads(text)
    for entry in entries:
        # Else shown as the text it is: not an instant, or one whose offset
        # takes it past the years 1-9999 in UTC (a plain-SQL writer's
        # "9999-12-31T23:00:00-05:00"), which failed the page as it was shown.
        with contextlib.suppress(TypeError, ValueError, OverflowError):
            at = datetime.fromisoformat(entry["at"])
            at.astimezone(UTC)
            entry["at"] = at
    return entries


def _pretty(text: str | None) -> dict[str, Any] | None:
    """JSON text indented for reading; past `SHOWN_CHARS`, or nested deeper
    than Python parses, the stored text as it is (cut), so a hostile value
    shows as text and never breaks the page."""
    if text is None:
        return None
    cut = len(text) > SHOWN_CHARS
    if not cut:
        try:
            shown = indented_json(json.loads(text), len(text), ensure_ascii=False)
        except (RecursionError, ValueError):
            shown = None
        if shown is not None:  # else indenting would multiply it: as stored
            return {"text": shown, "cut": False}
    return {"text": text[:SHOWN_CHARS], "cut": cut}


def schedules(conn: psycopg.Connection[Any], after: str) -> tuple[list[dict[str, Any]], str | None]:
    """A page of schedules by name after `after`, and the next page's cursor."""
    rows = _rows(conn.execute(sql("console_schedules"), {"after": after, "limit": PAGE + 1}))
    more = len(rows) > PAGE
    rows = rows[:PAGE]
    return rows, (rows[-1]["name"] if more else None)


def schedule(conn: psycopg.Connection[Any], name: str) -> dict[str, Any] | None:
    """One schedule with its next fires and its ledger; None when absent.
    A schedule whose stored cron or time zone cannot be used (written past
    `add`'s checks, parked by firing) has no next fires and says why."""
    from tick.schedules import ScheduleNotFound, ScheduleUnusable, history, next_fires

    row = _rows(conn.execute(sql("console_schedule"), {"name": name}))
    if not row:
        return None
    unusable = None
    try:
        try:
            upcoming = next_fires(conn, name, 5)
        except ScheduleUnusable as error:  # parked: its cron or zone cannot fire (SPEC §15)
            upcoming, unusable = [], str(error)
        ledger = history(conn, name, PAGE)
    except ScheduleNotFound:
        return None
    return {**row[0], "upcoming": upcoming, "ledger": ledger, "unusable": unusable}


def ticks(conn: psycopg.Connection[Any], driver: str | None,
          cursor: tuple[datetime | str, int] | None) -> tuple[list[dict[str, Any]], str | None]:
    """A page of the tick history, newest first, and the next page's cursor.
    A started_at Python cannot hold comes as the server's text (SPEC §4.2),
    and so goes into the cursor."""
    import psycopg

    from tick.ui.filters import BadInput

    try:
        rows = _rows(conn.execute(sql("console_ticks"), {
            "driver": driver, "before_at": cursor[0] if cursor else None,
            "before_id": cursor[1] if cursor else None, "limit": PAGE + 1}))
    except psycopg.errors.DataError:  # a cursor shaped like an instant, but none
        raise BadInput("before is not a ticks page cursor") from None
    more = len(rows) > PAGE
    rows = rows[:PAGE]
    last = rows[-1] if more else None
    if last is None:
        return rows, None
    at = last["started_at"]
    return rows, f"{at.isoformat() if isinstance(at, datetime) else at}/{last['id']}"


def limits(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    from tick.limits import list_limits

    # Counted as far as the page shows them ("10,000+"), SPEC §19.
    return list_limits(conn, cap=CAP + 1)
