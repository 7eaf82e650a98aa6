"""Operator commands on the queue (SPEC §7.4, §22): status, list, show, retry,
cancel, discard."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tick.errors import JobNotFound, JobStateError
from tick.statements import sql
from tick.words import DEAD_STATES, FINISHED_STATES

if TYPE_CHECKING:
    import psycopg

SHOW_COLUMNS = (
    "id", "kind", "state", "queue", "key", "priority", "attempts", "max_attempts",
    "timeout_secs", "run_at",
    "locked_by", "locked_until", "result", "last_error", "dedupe_key", "created_at",
    "updated_at", "started_at", "finished_at", "progress", "continues", "checkpoint", "payload",
    "errors", "trace_context",
)
LIST_COLUMNS = (
    "id", "kind", "state", "queue", "priority", "attempts", "max_attempts", "progress",
    "continues", "run_at", "updated_at", "waiting", "last_error",
)
FAMILY_SHOWN = 20  # parents and children listed by `awc jobs show` and the console
FAMILY_CAP = 100_000  # children counted up to this


def status(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """`{"by_state", "by_kind", "oldest_ready_age_s", "dead_letters",
    "last_ticks", "schedule_problems"}` (SPEC §7.4, §16); the last, the
    schedules with a `missed` or `overlap` fire recorded in the last 24 hours
    (`schedule`, `status`, `fires`, `last_fire_at`), is awc's own addition
    (SPEC §22: what the operator does next)."""
    from tick.history import last_ticks

    by_state: dict[str, int] = {}
    by_kind: dict[str, dict[str, int]] = {}
    for kind, state, count in conn.execute(sql("status_counts")).fetchall():
        by_state[state] = by_state.get(state, 0) + int(count)
        by_kind.setdefault(kind, {})[state] = int(count)
    row = conn.execute(sql("oldest_ready_age")).fetchone()
    age = None if row is None or row[0] is None else round(float(row[0]), 3)
    return {
        "by_state": by_state,
        "by_kind": by_kind,
        "oldest_ready_age_s": age,
        "dead_letters": by_state.get("FAILED", 0),
        "last_ticks": last_ticks(conn),
        "schedule_problems": [
            {"schedule": name, "status": what, "fires": int(n), "last_fire_at": last}
            for name, what, n, last in conn.execute(sql("schedule_problems"))],
    }


def list_jobs(
    conn: psycopg.Connection[Any],
    *,
    state: str | None = None,
    kind: str | None = None,
    queue: str | None = None,
    limit: int = 50,
) -> list[dict[str, Any]]:
    """Newest jobs first, narrowed by state, kind or queue."""
    params = {"state": state, "kind": kind, "queue": queue, "limit": limit}
    rows = conn.execute(sql("list_jobs"), params).fetchall()
    return [dict(zip(LIST_COLUMNS, row, strict=True)) for row in rows]


def show_job(conn: psycopg.Connection[Any], job_id: int) -> dict[str, Any]:
    """One job in full; a missing job is a `JobNotFound`. Its error
    history comes newest first, each traceback as a list of lines, which
    indented JSON prints one to a row (SPEC §22)."""
    row = conn.execute(sql("show_job"), {"id": job_id}).fetchone()
    if row is None:
        raise JobNotFound(f"job {job_id} does not exist")
    job = dict(zip(SHOW_COLUMNS, row, strict=True))
    job["errors"] = _history(job["errors"])
    family = job_family(conn, job_id)
    if family["parents"] or family["children"]:
        job["dependencies"] = family
    return job


def job_family(conn: psycopg.Connection[Any], job_id: int,
               shown: int = FAMILY_SHOWN) -> dict[str, Any]:
    """A job's parents and children (SPEC §20): `parents` (how many),
    `waiting_for` (how many are not final), `on_parent_failure`, `children`
    (how many, up to FAMILY_CAP), and the first `shown` of each in id order
    as `{id, kind, state}` (`parents_shown`, `children_shown`)."""
    import json

    row = conn.execute(sql("job_family"),
                       {"id": job_id, "shown": shown, "cap": FAMILY_CAP}).fetchone()
    assert row is not None  # one row, always
    parents, unfinished, parents_shown, children, children_shown, policy, counted, missing = row

    def listed(text: str) -> list[dict[str, Any]]:
        return [{"id": i, "kind": k, "state": s} for i, k, s in json.loads(text)]

    family = {"parents": int(parents), "waiting_for": int(unfinished),
              "on_parent_failure": policy, "parents_shown": listed(parents_shown),
              "children": int(children), "children_shown": listed(children_shown)}
    # A PENDING job's own count is what the claim reads: where it and its
    # parents disagree (a count or a parent changed by hand), both are said,
    # so a job held for ever does not read as "waiting for nothing".
    if counted is not None and int(counted) != int(unfinished):
        family["counted_waiting"] = int(counted)
    if missing:
        family["missing_parents"] = int(missing)
    return family


def _history(errors: Any) -> Any:
    if not isinstance(errors, list):
        return errors  # not awc's: shown as stored
    shown = []
    for entry in reversed(errors):
        if isinstance(entry, dict) and isinstance(entry.get("traceback"), str):
            entry = {**entry, "traceback": entry["traceback"].splitlines()}
        shown.append(entry)
    return shown


def _state_of(conn: psycopg.Connection[Any], job_id: int) -> str | None:
    row = conn.execute(sql("job_state"), {"id": job_id}).fetchone()
    return None if row is None else str(row[0])


def cancel(conn: psycopg.Connection[Any], job_id: int) -> None:
    """Cancel a PENDING or RUNNING job; a running holder's outcome is fenced out."""
    row = conn.execute(sql("cancel_jobs"), {"ids": [job_id]}).fetchone()
    if row is None or row[0] == 0:
        state = _state_of(conn, job_id)
        if state is None:
            raise JobNotFound(f"job {job_id} does not exist")
        raise JobStateError(
            f"job {job_id} is {state}; only PENDING or RUNNING jobs can be cancelled")


def retry(conn: psycopg.Connection[Any], job_id: int) -> None:
    """Send a FAILED or CANCELLED job back to PENDING with a fresh attempt budget."""
    from psycopg.errors import UniqueViolation

    from tick.bulk import in_transaction, revive

    held = JobStateError(f"job {job_id} cannot be retried: a live job holds its dedupe key")
    try:
        revived = in_transaction(conn, lambda: revive(conn, [job_id]))
    except UniqueViolation:
        raise held from None
    if revived == 0:
        state = _state_of(conn, job_id)
        if state is None:
            raise JobNotFound(f"job {job_id} does not exist")
        if state in DEAD_STATES:
            oversized = conn.execute(sql("oversized_names"), {"id": job_id}).fetchone()
            if oversized is not None and oversized[0]:
                raise JobStateError(f"job {job_id} cannot be retried: its kind, queue, key or "
                                    "dedupe key is longer than a producer writes")
            raise held  # revive_jobs left it: its dedupe key is live
        raise JobStateError(
            f"job {job_id} is {state}; only FAILED or CANCELLED jobs can be retried")


def discard(conn: psycopg.Connection[Any], job_id: int) -> None:
    """Delete a FAILED, CANCELLED or COMPLETED job (SPEC §22)."""
    from tick.bulk import change

    with conn.transaction():  # the lock and the delete: one transaction (lock_discarded.sql)
        discarded = change(conn, "discard", [job_id])
    if discarded == 0:
        state = _state_of(conn, job_id)
        if state is None:
            raise JobNotFound(f"job {job_id} does not exist")
        if state in FINISHED_STATES:  # kept by discard_jobs' guard (SPEC §20)
            raise JobStateError(f"job {job_id} is a parent a job not yet final still needs; "
                                f"discard it once its children are final (awc jobs show {job_id})")
        raise JobStateError(f"job {job_id} is {state}; only FAILED, CANCELLED or "
                            "COMPLETED jobs can be discarded")
