"""What the console changes (SPEC §19), each change and its audit event in
one transaction, so an action is recorded exactly when it happened.

Single actions reuse the operator commands (`tick.admin`, `tick.schedules`)
and their refusals; bulk actions touch at most `BULK_CAP` jobs, read through
indexes, never a scan, and only the set the operator saw: the preview seals
the ids it counted and the confirmation carries that seal, so a set that
changed in between (more jobs matching by the time of the click, or others)
is previewed again and nothing is changed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tick.bulk import ACTION_STATES, change, in_transaction
from tick.bulk import BULK_CAP as BULK_CAP
from tick.statements import sql
from tick.ui.filters import JobFilter

if TYPE_CHECKING:
    import psycopg

# The actions' states, retry, cancel and discard (SPEC §22), and their cap.
BULK_STATES = ACTION_STATES


def _audit(conn: psycopg.Connection[Any], action: str, subject: str,
           detail: dict[str, Any] | None = None) -> None:
    conn.execute(sql("console_audit"), {
        "event": f"console.{action}", "subject": subject,
        "detail": None if detail is None else json.dumps(detail, ensure_ascii=False)})


def retry(conn: psycopg.Connection[Any], job_id: int) -> None:
    """Retry one FAILED or CANCELLED job (a `JobStateError` says why not)."""
    from tick.admin import retry as retry_job

    with conn.transaction():
        retry_job(conn, job_id)
        _audit(conn, "retry", f"job:{job_id}")


def cancel(conn: psycopg.Connection[Any], job_id: int) -> None:
    """Cancel one PENDING or RUNNING job (a `JobStateError` says why not)."""
    from tick.admin import cancel as cancel_job

    with conn.transaction():
        cancel_job(conn, job_id)
        _audit(conn, "cancel", f"job:{job_id}")


def discard(conn: psycopg.Connection[Any], job_id: int) -> None:
    """Delete one FAILED, CANCELLED or COMPLETED job (SPEC §22; a
    `JobStateError` says why not)."""
    from tick.admin import discard as discard_job

    with conn.transaction():
        discard_job(conn, job_id)
        _audit(conn, "discard", f"job:{job_id}")


def limit(conn: psycopg.Connection[Any], action: str, scope: str, name: str) -> str:
    """Pause or resume a kind or queue (SPEC §22), audited as
    `console.pause_limit` / `console.resume_limit`; what it did, in words.
    Resuming what `awc pause` did not pause is a `JobStateError`-like refusal
    (`AwcError`)."""
    from tick.errors import AwcError
    from tick.limits import pause, resume

    with conn.transaction():
        if action == "pause":
            if not pause(conn, scope, name):
                return "was paused already"
            _audit(conn, "pause_limit", f"{scope}:{name}")
            return "paused"
        outcome = resume(conn, scope, name)
        if outcome is None:
            # No limit at all, or one set to 0 with `awc limits`: not a pause's.
            raise AwcError(f"{scope} {name[:200]!r} is not paused by a pause "
                           "(a limit set to 0 with awc limits is changed there)")
        _audit(conn, "resume_limit", f"{scope}:{name}", {"limit": outcome})
    return "resumed"


def schedule(conn: psycopg.Connection[Any], action: str, name: str) -> int | None:
    """Pause, resume or trigger a schedule; trigger returns the job's id.
    A missing schedule is a `ScheduleNotFound`."""
    from tick import schedules

    with conn.transaction():
        job = None
        # A schedule stored past `add`'s checks can still be paused; resume
        # refuses it by name (`ScheduleUnusable`, SPEC §15).
        if action == "pause":
            schedules.pause(conn, name)
        elif action == "resume":
            schedules.resume(conn, name)
        else:
            job = schedules.trigger(conn, name)
        _audit(conn, action, f"schedule:{name}", None if job is None else {"job_id": job})
    return job


@dataclass(frozen=True)
class Preview:
    """What a bulk action would touch now: how many jobs, and the seal of
    their ids that its confirmation must carry back."""

    touches: int
    seal: str


@dataclass(frozen=True)
class Bulk:
    action: str  # "retry", "cancel" or "discard"
    where: JobFilter

    def states(self) -> list[str]:
        eligible = BULK_STATES[self.action]
        if self.where.state is None:
            return list(eligible)
        return [self.where.state] if self.where.state in eligible else []

    def _candidates(self, conn: psycopg.Connection[Any]) -> list[int]:
        states = self.states()
        if not states:
            return []
        if self.where.id is not None:
            from psycopg.rows import dict_row

            with conn.cursor(row_factory=dict_row) as cur:
                row = cur.execute(sql("console_job_listed"), {
                    "id": self.where.id, "state": None, "kind": self.where.kind,
                    "queue": self.where.queue}).fetchone()
            return [self.where.id] if row is not None and row["state"] in states else []
        rows = conn.execute(sql("console_bulk_candidates"), {
            "states": states, "kind": self.where.kind, "queue": self.where.queue,
            "older_secs": None, "cap": BULK_CAP}).fetchall()
        return [int(r[0]) for r in rows]

    def _sealed(self, ids: list[int]) -> Preview:
        # The action and the exact ids, so a confirmation applies to the set
        # its preview counted and to nothing else.
        text = self.action + ":" + ",".join(map(str, sorted(ids)))
        return Preview(len(ids), hashlib.sha256(text.encode()).hexdigest()[:32])

    def preview(self, conn: psycopg.Connection[Any]) -> Preview:
        """The jobs the action would touch now (at most `BULK_CAP`)."""
        return self._sealed(self._candidates(conn))

    def apply(self, conn: psycopg.Connection[Any], seal: str) -> int | Preview:
        """Do it to the jobs the preview sealed with `seal`; the number of
        jobs changed. When the matching set is no longer that one, nothing
        changes and the new preview is returned for the operator to confirm.

        Each statement changes only the ids given, and only those still in a
        state the action applies to, so the change is at most what the
        operator confirmed, even if jobs change state in between."""
        def once() -> int | Preview:
            ids = self._candidates(conn)
            now = self._sealed(ids)
            if now.seal != seal:
                return now
            changed = change(conn, self.action, ids)
            _audit(conn, f"bulk_{self.action}", "jobs", {
                "filter": {k: v for k, v in vars(self.where).items() if v is not None},
                "count": changed})
            return changed

        return in_transaction(conn, once)
