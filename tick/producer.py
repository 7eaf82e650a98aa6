"""The producer side of the queue (SPEC §4.3): `enqueue`, `enqueue_many`,
and the checks that refuse, by field, what PostgreSQL would refuse.

Neither function commits: an enqueue joins the producer's own transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from tick.errors import EnqueueError as EnqueueError  # its home before SPEC §20
from tick.payloads import payload_json
from tick.statements import sql
from tick.text import text_refusal
from tick.timeouts import timeout_refusal

if TYPE_CHECKING:
    import psycopg

    from tick.copy_in import GraphMark

ENQUEUE_FIELDS = frozenset(
    {"kind", "payload", "max_attempts", "run_at", "priority", "queue", "dedupe_key",
     "timeout_secs", "after", "on_parent_failure",  # after, on_parent_failure: SPEC §20
     "traceparent", "tracestate",  # SPEC §21
     "key"}  # SPEC §23
)


# Below this many jobs one INSERT is as quick as reserving ids and a COPY.
COPY_THRESHOLD = 64

# What a producer may send (SPEC §4.3). The names fit in every index that
# holds them with room to spare; PostgreSQL's own bounds for the numbers.
NAME_LIMIT = 200  # kind and queue, characters
DEDUPE_KEY_LIMIT = 1000  # characters
KEY_LIMIT = 200  # a fair-share key (SPEC §23), characters
INT4_MAX = 2**31 - 1


def _check_text(value: Any, field: str, limit: int) -> str:
    refusal = text_refusal(value, limit)
    if refusal is not None:
        raise EnqueueError(field, refusal)
    return str(value)


def _check_int(value: Any, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise EnqueueError(field, "must be an integer")
    if not low <= value <= high:
        raise EnqueueError(field, f"must be between {low} and {high}")
    return value


# PostgreSQL reads a UTC offset written in text up to ±15:59:59, in whole
# seconds; Python's reach ±23:59:59.999999 (`timezone(timedelta(hours=16))`).
# enqueue_many sends instants as text (an array, a COPY): one with such an
# offset goes in UTC, the same instant.
_TEXT_OFFSET_LIMIT = timedelta(hours=15, minutes=59, seconds=59)


def _in_text(run_at: datetime | None) -> datetime | None:
    """`run_at`, with an offset PostgreSQL reads in text (may raise
    OverflowError: `_check_job` refuses such an instant first). A naive one
    is UTC, as `awc enqueue --run-at` reads it: sent naive, the server read
    it in the session's TimeZone (a role's Pacific/Chatham moved it 13 h 45
    earlier)."""
    if run_at is None:
        return None
    offset = run_at.utcoffset()
    if offset is None:
        return run_at.replace(tzinfo=UTC)
    if abs(offset) <= _TEXT_OFFSET_LIMIT and not offset.microseconds:
        return run_at
    return run_at.astimezone(UTC)


def _check_job(
    kind: Any, max_attempts: Any, run_at: Any, priority: Any, queue: Any, dedupe_key: Any,
    timeout_secs: Any = None, key: Any = None,
) -> None:
    """Refuse, by field, what PostgreSQL would refuse (SPEC §4.3, §23, §26)."""
    if _check_text(kind, "kind", NAME_LIMIT) == "":
        raise EnqueueError("kind", "must not be empty")
    _check_text(queue, "queue", NAME_LIMIT)
    if dedupe_key is not None:
        _check_text(dedupe_key, "dedupe_key", DEDUPE_KEY_LIMIT)
    _check_int(max_attempts, "max_attempts", 1, INT4_MAX)
    _check_int(priority, "priority", -32768, 32767)
    if run_at is not None:
        if not isinstance(run_at, datetime):
            raise EnqueueError("run_at", "must be a datetime")
        try:
            # In UTC: year 1 at +14:00 is a year BC there, 9999 at -14:00
            # year 10000; PostgreSQL stores both, Python reads neither back.
            if run_at.utcoffset() is not None:
                run_at.astimezone(UTC)
        except OverflowError:
            raise EnqueueError("run_at", "is outside the years 1 to 9999 in UTC") from None
    if timeout_secs is not None:
        refusal = timeout_refusal(timeout_secs)
        if refusal is not None:
            raise EnqueueError("timeout_secs", refusal)
    if key is not None:
        if _check_text(key, "key", KEY_LIMIT) == "":
            raise EnqueueError("key", "must not be empty")
        if key == "*":  # names every key in a limit's scope (SPEC §23)
            raise EnqueueError("key", "must not be '*'")


def check_job(
    kind: str,
    payload: Mapping[str, Any] | None = None,
    *,
    max_attempts: int = 5,
    run_at: datetime | None = None,
    priority: int = 0,
    queue: str = "default",
    dedupe_key: str | None = None,
    timeout_secs: float | None = None,
    key: str | None = None,
) -> str:
    """Check a job as `enqueue` would, sending nothing; its payload as JSON
    text. `EnqueueError` names the field PostgreSQL would refuse."""
    _check_job(kind, max_attempts, run_at, priority, queue, dedupe_key, timeout_secs, key)
    return payload_json(payload)


def enqueue(
    conn: psycopg.Connection[Any],
    kind: str,
    payload: Mapping[str, Any] | None = None,
    *,
    max_attempts: int = 5,
    run_at: datetime | None = None,
    priority: int = 0,
    queue: str = "default",
    dedupe_key: str | None = None,
    timeout_secs: float | None = None,
    after: Sequence[int] | None = None,
    on_parent_failure: str | None = None,
    traceparent: str | None = None,
    tracestate: str | None = None,
    key: str | None = None,
) -> int:
    """Enqueue one job and return its id (SPEC §4.3).

    Does not commit: the enqueue joins the caller's transaction. With a
    `dedupe_key` held by a PENDING or RUNNING job, nothing is inserted and that
    job's id is returned. `timeout_secs` (1 s to 7 days) is how long one run
    may take, overriding its handler's in either direction (SPEC §26). With
    `after`, the job waits for those jobs to be final, and
    `on_parent_failure` ("cancel" or "run") says what a parent's failure
    does to it (SPEC §20). `key` (1 to 200 characters) is the tenant or
    unit whose jobs share the queue fairly with other keys' (SPEC §23). The
    job carries the current span's trace context, or `traceparent`/
    `tracestate` when given (SPEC §21): a traceparent that is not W3C is not
    stored, and never an error.
    """
    if after is not None or on_parent_failure is not None:
        from tick.parents import enqueue_graph

        job: dict[str, Any] = {
            "kind": kind, "payload": payload, "max_attempts": max_attempts, "run_at": run_at,
            "priority": priority, "queue": queue, "dedupe_key": dedupe_key, "after": after,
            "timeout_secs": timeout_secs, "key": key}
        if traceparent is not None or tracestate is not None:
            job.update(traceparent=traceparent, tracestate=tracestate)
        if on_parent_failure is not None:
            job["on_parent_failure"] = on_parent_failure
        check_job(kind, payload, max_attempts=max_attempts, run_at=run_at, priority=priority,
                  queue=queue, dedupe_key=dedupe_key, timeout_secs=timeout_secs, key=key)
        return enqueue_graph(conn, [job], lambda plain, marks: _insert_jobs(conn, plain, marks),
                             single=True)[0]
    params = {
        "kind": kind,
        "payload": check_job(kind, payload, max_attempts=max_attempts, run_at=run_at,
                             priority=priority, queue=queue, dedupe_key=dedupe_key,
                             timeout_secs=timeout_secs, key=key),
        "max_attempts": max_attempts,
        "run_at": _in_text(run_at),
        "priority": priority,
        "queue": queue,
        "dedupe_key": dedupe_key,
        "timeout_secs": timeout_secs,
        "trace_context": _trace_text(traceparent, tracestate),
        "key": key,
    }
    # The live holder of a dedupe key may commit after this statement's
    # snapshot was taken: the insert then conflicts yet the lookup sees
    # nothing. Asking again sees it (or inserts, if it finished meanwhile).
    for _ in range(5):
        row = conn.execute(sql("enqueue_job"), params).fetchone()
        if row is not None:
            return int(row[0])
    raise RuntimeError(f"enqueue of kind {kind!r} did not settle under dedupe contention")


def _trace_text(traceparent: Any, tracestate: Any, current: str | None = None) -> str | None:
    """The job's `trace_context` (SPEC §21): the given headers, else the
    current span's context (`current` when the caller looked it up once)."""
    from tick import trace_context

    if traceparent is not None:
        return trace_context.stored_text(traceparent, tracestate)
    return current if current is not None else trace_context.current()


def enqueue_many(conn: psycopg.Connection[Any], jobs: Iterable[Mapping[str, Any]]) -> list[int]:
    """Enqueue many jobs in one round trip; ids in input order (SPEC §4.3).

    Each job is a mapping with `enqueue`'s parameter names, `kind` required;
    an `after` entry may be `"#N"`, the N-th job of this call (SPEC §20).
    Does not commit. A job whose dedupe key is live gets the live job's id.
    """
    batch = list(jobs)
    if not batch:
        return []
    for n, job in enumerate(batch):  # before any field of any job is read
        if type(job) is not dict and not isinstance(job, Mapping):
            raise TypeError(f"enqueue_many: job {n} is a {type(job).__name__}, not a mapping")
    from tick.parents import wants_parents

    if wants_parents(batch):
        from tick.parents import enqueue_graph

        _check_fields(batch)  # every field, before a parent is locked
        return enqueue_graph(conn, batch, lambda plain, marks: _insert_jobs(conn, plain, marks))
    return _insert_jobs(conn, batch)


def _insert_jobs(conn: psycopg.Connection[Any], jobs: Sequence[Mapping[str, Any]],
                 marks: list[GraphMark] | None = None) -> list[int]:
    """Insert `jobs` (no dependency fields left in them), each with its
    graph mark when `marks` is given: a child goes in waiting, in none of
    the claim's indexes (inserted ready and then marked waiting, it left an
    entry in each that every claim walked past until a vacuum)."""
    batch = list(jobs)
    traces = _traces(batch)
    if len(batch) >= COPY_THRESHOLD and not any(job.get("dedupe_key") for job in batch):
        from tick.copy_in import copy_many

        # Checked as the rows stream: the server ingests a chunk while the
        # next is checked (decision 0006); a refusal ends the COPY in a
        # savepoint, so the caller's transaction is as it was.
        return copy_many(conn, batch, traces, FieldCheck(), marks)
    return _insert_many(conn, batch, traces, _check_fields(batch), marks)


class FieldCheck:
    """Refuse, by job and field, what PostgreSQL would refuse (SPEC §4.3),
    payload included. Called with each job and its index, it returns the
    job's checked fields (kind, max_attempts, run_at, priority, queue,
    dedupe_key, timeout_secs, key), one tuple shared by the jobs whose
    fields are the same values of the same types (the COPY formats each
    such tuple once, `tick.copy_in`), and its payload as JSON."""

    __slots__ = ("bare", "passed")

    def __init__(self) -> None:
        # A batch repeats its kinds, queues and limits: each distinct
        # combination is checked once. The key holds each value's type as
        # well, so True never passes for 1, nor 1.0 for 1; an unhashable
        # value, or one of a subclass, is checked every time.
        self.passed: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        # The usual job, a kind (a str itself) and perhaps a payload, looked
        # up by its kind alone: the producer's CPU per job is what keeps a
        # COPY under the server's rate where they share cores (decision 0006).
        self.bare: dict[str, tuple[Any, ...]] = {}

    def __call__(self, n: int, job: Mapping[str, Any]) -> tuple[tuple[Any, ...], str]:
        try:
            kind = job.get("kind")
            bare = kind if type(kind) is str and (
                len(job) == 1 or (len(job) == 2 and "payload" in job)) else None
            seen = None if bare is None else self.bare.get(bare)
            if seen is None:
                seen = self._fields(job)
                if bare is not None:  # its fields are the defaults and a str: never unequal
                    self.bare[bare] = seen
            return seen, payload_json(job.get("payload"))
        except EnqueueError as error:
            raise EnqueueError(f"job {n}: {error.field}", error.reason) from None

    def _fields(self, job: Mapping[str, Any]) -> tuple[Any, ...]:
        if not ENQUEUE_FIELDS.issuperset(job):
            # Named as repr() shows them (escapes, not raw controls), the
            # first few and cut: a mapping may hold any number of any keys.
            import reprlib

            unknown = [name for name in job if name not in ENQUEUE_FIELDS]
            named = ", ".join(reprlib.repr(name) for name in unknown[:3])
            more = f" and {len(unknown) - 3:,} more" if len(unknown) > 3 else ""
            raise TypeError(f"enqueue_many: unknown job fields {named}{more}")
        if "kind" not in job:
            raise TypeError("enqueue_many: every job needs a 'kind'")
        fields = (job["kind"], job.get("max_attempts", 5), job.get("run_at"),
                  job.get("priority", 0), job.get("queue", "default"), job.get("dedupe_key"),
                  job.get("timeout_secs"), job.get("key"))
        key = (*fields, *map(type, fields))
        try:
            seen = self.passed.get(key)
        except TypeError:  # unhashable: never cached
            seen, hashable = None, False
        else:
            hashable = True
        if seen is None:
            _check_job(*fields)
            if fields[2] is not None:  # sent as text by the COPY
                fields = (*fields[:2], _in_text(fields[2]), *fields[3:])
            # Shared only between values of the built-in types themselves: a
            # subclass may call unequal values equal, and one job would then
            # be written with another's fields.
            if hashable and all(type(value) in _PLAIN for value in fields):
                self.passed[key] = fields
            seen = fields
        return seen


def _check_fields(batch: list[Mapping[str, Any]]) -> list[str]:
    """Every job of `batch` checked (`FieldCheck`) before anything is sent;
    each job's payload as JSON."""
    check = FieldCheck()
    return [check(n, job)[1] for n, job in enumerate(batch)]


_PLAIN = frozenset({str, int, float, type(None), datetime})


def _traces(batch: list[Mapping[str, Any]]) -> list[str | None] | None:
    """Each job's trace context as stored (SPEC §21), or None when no job
    carries one (the COPY then sends no such column)."""
    from tick.trace_context import current

    # The current context, looked up once for the batch: jobs without
    # headers of their own carry it (None: no column to send in a COPY).
    headers = any("traceparent" in job or "tracestate" in job for job in batch)
    here = current()
    return None if not headers and here is None else (
        [_trace_text(job.get("traceparent"), job.get("tracestate"), here) for job in batch]
        if headers else [here] * len(batch))


def _insert_many(conn: psycopg.Connection[Any], batch: list[Mapping[str, Any]],
                 traces: list[str | None] | None, payloads: list[str],
                 marks: list[GraphMark] | None = None) -> list[int]:
    """INSERT the jobs in one statement, dedupe keys and all."""
    columns: dict[str, list[Any]] = {
        "kinds": [], "payloads": payloads, "max_attempts": [], "run_ats": [],
        "priorities": [], "queues": [], "dedupe_keys": [], "timeouts": [], "keys": [],
        "trace_contexts": traces if traces is not None else [None] * len(batch),
    }
    for job in batch:
        columns["kinds"].append(job["kind"])
        columns["max_attempts"].append(job.get("max_attempts", 5))
        columns["run_ats"].append(_in_text(job.get("run_at")))
        columns["priorities"].append(job.get("priority", 0))
        columns["queues"].append(job.get("queue", "default"))
        columns["dedupe_keys"].append(job.get("dedupe_key"))
        columns["timeouts"].append(job.get("timeout_secs"))
        columns["keys"].append(job.get("key"))
    # No marks: no graph (the statement's unnest pads a missing array with nulls).
    graph = {"waiting": None, "has_children": None, "policies": None} if marks is None else {
        "waiting": [m[0] for m in marks], "has_children": [m[1] for m in marks],
        "policies": [m[2] for m in marks]}
    rows = conn.execute(sql("enqueue_jobs"), {**columns, **graph}).fetchall()
    return _ids_in_input_order(conn, columns["dedupe_keys"], rows)


def _ids_in_input_order(
    conn: psycopg.Connection[Any],
    keys: Sequence[str | None],
    rows: Sequence[tuple[Any, ...]],
) -> list[int]:
    # Rows were inserted in input order, so ascending ids follow the inserted
    # inputs; an input with a key is inserted only if it is the first of the
    # batch to carry that key and the returned row carries it.
    inserted = sorted((int(r[0]), r[1]) for r in rows)
    ids: list[int | None] = []
    seen: set[str] = set()
    at = 0
    for key in keys:
        if key is None or (key not in seen and at < len(inserted) and inserted[at][1] == key):
            ids.append(inserted[at][0])
            at += 1
        else:
            ids.append(None)
        if key is not None:
            seen.add(key)
    missing = [k for k, i in zip(keys, ids, strict=True) if i is None and k is not None]
    if missing:
        live = dict(conn.execute(sql("live_dedupe_ids"), {"keys": missing}).fetchall())
        ids = [i if i is not None else live.get(k) for k, i in zip(keys, ids, strict=True)]
    if any(i is None for i in ids):
        raise RuntimeError("enqueue_many: a deduplicated job finished before its id was read")
    return [int(i) for i in ids if i is not None]
