"""The queue's engine-side statements (SPEC §4.2): the claim and the fenced
writes that record outcomes.

Each operation is one named statement (`tick/sql/`). The engine's writes are
batched: one statement records every outcome of a kind in a flush, and a flush
travels with the next claim in one pipelined round trip. The producer side
(enqueue) is `tick/producer.py`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from tick.statements import sql
from tick.words import Record

if TYPE_CHECKING:
    import psycopg

    from tick.history import Tail


# A claim with no cursor walks the ready index from its start (SPEC §24):
# -priority is a smallint negated, so every key is after -2^31.
NO_CURSOR: dict[str, Any] = {"after_p": -(2**31), "after_r": "-infinity", "after_i": 0,
                             "xmax": None, "xip": [], "key_after": None, "key_pass": True}


class ClaimedRow(NamedTuple):
    """One claimed job as the claim statement returns it."""

    id: int
    kind: str
    payload: str  # JSON text: decoded on the slot thread, not the coordinator
    attempts: int
    max_attempts: int
    token: str
    slot: str
    lease_s: float
    wait_s: float
    checkpoint: str | None  # JSON text an earlier claim saved (SPEC §17), or None
    # SPEC §21: the job's lane, its stored trace context (JSON text, read
    # only while tracing), and whether a run of it came before (its span
    # then links to that context instead of joining it).
    queue: str = "default"
    trace: str | None = None
    rerun: bool = False
    timeout: float | None = None  # SPEC §26: the job's own timeout, seconds, or None


@dataclass(slots=True)
class Writes:
    """One flush of fenced writes, grouped by statement."""

    complete: list[tuple[int, str, str | None]] = field(default_factory=list)
    # (id, token, error, delay secs, traceback or None: SPEC §22)
    retry: list[tuple[int, str, str, float, str | None]] = field(default_factory=list)
    # (id, token, error, traceback or None: SPEC §22)
    fail: list[tuple[int, str, str, str | None]] = field(default_factory=list)
    release: list[tuple[int, str]] = field(default_factory=list)
    # (id, token, lease secs): a heartbeat's lease extension
    lease_extensions: list[tuple[int, str, float]] = field(default_factory=list)
    # (id, token, state JSON or None to keep the last, delay secs): a Continue
    continuations: list[tuple[int, str, str | None, float]] = field(default_factory=list)
    # (id, token, state JSON, progress or None, lease secs)
    checkpoint: list[tuple[int, str, str, float | None, float]] = field(default_factory=list)
    # (id, token, lease secs): the engine's own renewals (SPEC §26), sent in
    # the same statement as the heartbeats'; never kept past a failed round
    # trip (the engine picks them again).
    renewals: list[tuple[int, str, float]] = field(default_factory=list)
    # The tokens a claim whose answer was lost with the connection may have
    # given its jobs (`lost_tokens`): the jobs holding one are found
    # (`held_claims`) and released, their attempt refunded, instead of
    # waiting out leases no one holds.
    lost: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.complete or self.retry or self.fail or self.release
                    or self.lease_extensions or self.continuations or self.checkpoint
                    or self.renewals or self.lost)

    def __add__(self, later: Writes) -> Writes:
        return Writes(self.complete + later.complete, self.retry + later.retry,
                      self.fail + later.fail, self.release + later.release,
                      self.lease_extensions + later.lease_extensions,
                      self.continuations + later.continuations,
                      self.checkpoint + later.checkpoint, self.renewals + later.renewals,
                      self.lost + later.lost)

    def singles(self) -> list[Writes]:
        """Each write as a flush of its own."""
        return ([Writes(complete=[w]) for w in self.complete]
                + [Writes(retry=[w]) for w in self.retry]
                + [Writes(fail=[w]) for w in self.fail]
                + [Writes(release=[w]) for w in self.release]
                + [Writes(lease_extensions=[w]) for w in self.lease_extensions + self.renewals]
                + [Writes(continuations=[w]) for w in self.continuations]
                + [Writes(checkpoint=[w]) for w in self.checkpoint])

    def first(self) -> tuple[Any, ...]:
        """The first write (of a single)."""
        return (self.complete or self.retry or self.fail or self.release
                or self.lease_extensions or self.continuations or self.checkpoint)[0]


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """A claim: the free slots to fill and the lease rules."""

    slots: list[str]
    lease_secs: float
    cap_secs: float
    leases_json: str
    kinds: list[str] | None
    queues: list[str] | None
    # Where the walk starts (tick/engine/cursor.py): after_p/_r/_i, xmax, xip.
    cursor: dict[str, Any] = field(default_factory=dict)
    # Keep the claimed jobs' own timeouts the claim returns (SPEC §26); off only
    # when the engine runs without renewals (bench/leases.py's reference).
    read_timeouts: bool = True
    # The last claim was the fair claim, or found a keyed job ready (SPEC
    # §23): send the fair claim, without the plain walk after it; else its
    # gate, then the walk (decision 0034).
    fair: bool = False
    dense: bool = False  # and its one-pass read held: send claim_dense_jobs.sql
    # Send step 2 of the limits (claim_limited_jobs.sql): the last claim's step 1
    # saw a kind or queue limit, or none was made; `lanes_only`, and nothing after
    # it: step 2 was the last claim (a limit may bind: decision 0018).
    lanes: bool = True
    lanes_only: bool = False
    # The claim's tokens are this random uuid with the job's slot number in
    # its last four hex digits, so that a claim whose answer is lost can
    # still be told by its tokens (`lost_tokens`).
    nonce: str = field(default_factory=lambda: new_nonce())


def new_nonce() -> str:
    """A claim's nonce: a random uuid, as text."""
    digits = os.urandom(16).hex()
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:32]}"


def lost_tokens(claim: ClaimRequest) -> list[str]:
    """Every token `claim` may have given a job: its nonce with each slot
    number (1 to the slots it asked for) in the last four hex digits, as the
    claim statements write them."""
    return [claim.nonce[:32] + f"{n:04x}" for n in range(1, len(claim.slots) + 1)]


class FairAnswer(NamedTuple):
    """What the fair claim (SPEC §23) said besides its jobs."""

    next: bool = False  # a keyed job was ready: send the next claim as the fair claim
    more: bool = False  # the claim came back short with ready jobs left: not drained
    again: bool = False  # and claim again at once (else shortly: it may be held)
    key: str | None = None  # the next key cursor (tick/engine/cursor.py), None: keep it
    dense: bool = False  # its one-pass read held: the next fair claim may be the short form
    spread: bool = True  # keys were as many as slots: the next full one tries that read
    by_lanes: bool = False  # the limits' lanes were the claim: the next sends steps 1 and 2 only


NO_FAIR = FairAnswer()  # no fair claim sent, or it did not claim


@dataclass(slots=True)
class RoundTrip:
    """What one pipelined round trip returned."""

    recorded: dict[int, tuple[Record, str]]
    extended: dict[int, float]
    claimed: list[ClaimedRow]
    tail_done: bool = False  # the tail statement returned a row
    tail_id: int | None = None  # the id it returned (a history row's)
    # jobs whose checkpoint the server refused, with why (type: first line)
    refused: dict[int, str] = field(default_factory=dict)
    held_back: bool = False  # ready jobs a global limit kept from the claim (SPEC §18)
    mark: str | None = None  # the claim's next cursor (JSON text), None if none was made
    fair: FairAnswer = NO_FAIR
    # the claimed jobs whose producer set a timeout (SPEC §26): id -> secs
    timeouts: dict[int, float] = field(default_factory=dict)
    # writes a refusal not their own kept out (`record_each`): sent again later
    kept: Writes = field(default_factory=Writes)
    claim_refused: bool = False  # the claim, sent apart, met a passing refusal
    lanes: bool = True  # its step 1 saw a kind or queue limit: send step 2 next (SPEC §18)

def array_literal(values: Sequence[str | None]) -> str:
    """`values` as one PostgreSQL array literal (NULL for None, every other
    element quoted), for a parameter the statement casts (`::text[]`,
    `::uuid[]`, `::jsonb[]`): built once per exchange with one join instead
    of psycopg's element by element, and sent as text to every statement
    that takes it (decision 0037)."""
    return "{" + ",".join(
        "NULL" if v is None else '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        for v in values) + "}"


def _unzip(rows: Sequence[tuple[Any, ...]], width: int) -> list[list[Any]]:
    if not rows:
        return [[] for _ in range(width)]
    return [list(column) for column in zip(*rows, strict=True)]


def round_trip(
    conn: psycopg.Connection[Any], writes: Writes, claim: ClaimRequest | None,
    tail: Tail | None = None,
) -> RoundTrip:
    """Record a flush of outcomes and claim the next batch in one round trip.

    The statements are pipelined in one transaction (`db.one_exchange`): the
    server runs them back to back, commits once, and the client waits once.
    Every write is fenced on (id, claim_token, RUNNING). `tail`, a statement
    that sees what the claim did, goes last (the tick history, SPEC §16).
    """
    pending: list[tuple[Record, psycopg.Cursor[Any]]] = []
    extend_cur = checkpoint_cur = limits_cur = limited_cur = keyed_cur = claim_cur = tail_cur = None
    from tick.db import one_exchange

    with one_exchange(conn):
        conn.execute(sql("pin_plans"))
        if writes.complete:
            ids, tokens, results = _unzip(writes.complete, 3)
            pending.append((Record.COMPLETE, conn.execute(sql("complete_jobs"), {
                "ids": "{" + ",".join(map(str, ids)) + "}", "tokens": array_literal(tokens),
                "results": array_literal(results)})))
        if writes.retry:
            ids, tokens, errors, delays, tracebacks = _unzip(writes.retry, 5)
            pending.append((Record.RETRY, conn.execute(
                sql("retry_jobs"), {"ids": ids, "tokens": tokens, "errors": errors,
                                    "delays": delays, "tracebacks": tracebacks})))
        if writes.fail:
            ids, tokens, errors, tracebacks = _unzip(writes.fail, 4)
            pending.append((Record.FAIL, conn.execute(
                sql("fail_jobs"), {"ids": ids, "tokens": tokens, "errors": errors,
                                   "tracebacks": tracebacks})))
        if writes.release:
            ids, tokens = _unzip(writes.release, 2)
            pending.append((Record.RELEASE, conn.execute(
                sql("release_jobs"), {"ids": ids, "tokens": tokens})))
        if writes.continuations:
            ids, tokens, states, delays = _unzip(writes.continuations, 4)
            pending.append((Record.CONTINUE, conn.execute(
                sql("continue_jobs"),
                {"ids": ids, "tokens": tokens, "states": states, "delays": delays})))
        if writes.lease_extensions or writes.renewals:
            # The handlers' heartbeats and the engine's renewals: one statement.
            ids, tokens, secs = _unzip(writes.lease_extensions + writes.renewals, 3)
            extend_cur = conn.execute(
                sql("extend_leases"), {"ids": ids, "tokens": tokens, "secs": secs})
        if writes.checkpoint:
            ids, tokens, states, progress, secs = _unzip(writes.checkpoint, 5)
            checkpoint_cur = conn.execute(
                sql("checkpoint_jobs"), {"ids": ids, "tokens": tokens, "states": states,
                                         "progress": progress, "secs": secs})
        if claim is not None and claim.slots:
            queues = claim.queues or []
            name = "claim_jobs_in_queue" if len(queues) == 1 else "claim_jobs"
            params = {
                **NO_CURSOR,
                **claim.cursor, "queue": queues[0] if queues else None,
                "slots": array_literal(claim.slots), "lease": claim.lease_secs,
                "cap": claim.cap_secs, "leases": claim.leases_json, "kinds": claim.kinds,
                "queues": claim.queues, "nonce": claim.nonce,
            }
            # Global limits (SPEC §18, decision 0012): lock, then claim the
            # limited jobs with a newer snapshot, then the rest: fairly across
            # keys when a keyed job is ready (SPEC §23, decision 0034), else
            # by the plain walk. The fair claim goes without the walk; its
            # gate goes before it; the lanes, while they are the claim,
            # alone. When one sent cannot claim, the answer says so and the
            # next claim sends the others at once.
            keyed = ("claim_keyed_gate" if not claim.fair
                     else "claim_dense_jobs" if claim.dense else "claim_keyed_jobs")
            limits_cur = conn.execute(sql("claim_limits"), params)
            if claim.lanes:  # else, with no kind or queue limit, the lanes claim nothing
                limited_cur = conn.execute(sql("claim_limited_jobs"), params)
            if not claim.lanes_only:
                keyed_cur = conn.execute(sql(keyed), params)
                if not claim.fair:
                    claim_cur = conn.execute(sql(name), params)
        if tail is not None:
            tail_cur = conn.execute(sql(tail[0]), tail[1])
    recorded: dict[int, tuple[Record, str]] = {}
    for record, cur in pending:
        for job_id, state in cur.fetchall():
            recorded[job_id] = (record, state)
    extended = dict(extend_cur.fetchall()) if extend_cur is not None else {}
    if checkpoint_cur is not None:
        extended.update(checkpoint_cur.fetchall())
    claimed, held_back, lane_key, lane_claim = [], False, None, False
    for row in limited_cur.fetchall() if limited_cur is not None else ():
        if row[0] is None:  # the lanes' next key cursor (SPEC §23), were they the claim, held_back
            lane_key, lane_claim, held_back = row[-3], bool(row[-2]), bool(row[-1])
        else:
            claimed.append(ClaimedRow._make(row[:-3]))
    fair = NO_FAIR
    if claim is not None and not claim.fair and keyed_cur is not None:
        (ready,) = keyed_cur.fetchone() or (False,)  # the gate: the walk took nothing
        fair = FairAnswer(next=ready, more=ready, again=ready)
    elif claim is not None and keyed_cur is not None:
        taken, key_mark, ran, more, dense = 0, None, False, False, False
        for row in keyed_cur.fetchall():
            if row[0] is None:  # the key cursor, a per-key limit's held_back, ran, more, dense
                key_mark, held, ran, more, dense = row[-5:]
                held_back = held_back or bool(held)
            else:
                claimed.append(ClaimedRow._make(row[:-5]))
                taken += 1
        # Not the claim (no keyed job ready, or a limit may bind): the walk,
        # not sent, must claim; the short form that did not hold: the full
        # fair claim, at once; else claim again at once if it took some.
        fair = (FairAnswer(more=True, again=True, key=key_mark) if not ran
                else FairAnswer(True, True, True) if claim.dense and not dense
                else FairAnswer(True, bool(more), bool(more) and taken > 0, key_mark,
                                dense is True, dense is not None))
    fair = fair._replace(key=fair.key or lane_key, by_lanes=lane_claim)  # the lanes claimed
    mark = None
    for row in claim_cur.fetchall() if claim_cur is not None else ():
        if row[0] is None:
            mark = row[-1]
        else:
            claimed.append(ClaimedRow._make(row[:-1]))
    keep = claim is not None and claim.read_timeouts
    timeouts = {row.id: row.timeout for row in claimed if keep and row.timeout is not None}
    limits = limits_cur.fetchone() if limits_cur is not None else None  # step 1's settings
    lanes = limits is None or limits[2] != "{}" or limits[3] != "{}"  # limited kinds, queues
    tail_row = tail_cur.fetchone() if tail_cur is not None else None
    return RoundTrip(recorded, extended, claimed, tail_row is not None,
                     tail_id=None if tail_row is None else int(tail_row[0]), held_back=held_back,
                     mark=mark, timeouts=timeouts, fair=fair, lanes=lanes)


def record_each(
    conn: psycopg.Connection[Any], writes: Writes
) -> tuple[RoundTrip, list[tuple[int, str, BaseException]], Writes]:
    """Record every write of `writes` in its own transaction (SPEC §4.2, "one
    bad outcome sinks nothing else"): after a batch was refused, this finds
    the rows the server refuses and records all the others.

    Returns what was recorded, the refused (id, token, error) outcomes, and
    the writes a refusal that is not the row's own kept out (a lock timeout,
    a cancel, a deadlock: `tick.faults.row_fault`), to be sent again. A refused
    heartbeat or checkpoint is no outcome: it goes in the result's
    `refused`, failing the handler's call only (its job runs on). A lost
    connection raises, as in `round_trip`, and so does a prepared statement
    the session lost (the run connects again, `tick.faults.PREPARED_GONE`).
    """
    from tick.db import session_lost
    from tick.faults import row_fault

    done = RoundTrip({}, {}, [])
    refused: list[tuple[int, str, BaseException]] = []
    unsent = Writes()
    for single in writes.singles():
        try:
            one = round_trip(conn, single, None)
        except Exception as error:
            if session_lost(conn, error):
                raise
            if not row_fault(error):  # not the row's: it fails no job (decision 0036)
                unsent = unsent + single
                continue
            first = single.first()
            if single.lease_extensions or single.checkpoint:
                text = str(error).strip()
                line = text.splitlines()[0][:200] if text else "no detail"
                done.refused[first[0]] = f"{type(error).__name__}: {line}"
            else:
                refused.append((first[0], first[1], error))
            continue
        done.recorded.update(one.recorded)
        done.extended.update(one.extended)
    return done, refused, unsent


def held_claims(conn: psycopg.Connection[Any], tokens: list[str]) -> list[tuple[int, str]]:
    """The running jobs holding any of `tokens` (`lost_tokens`), as (id, token)."""
    from tick.db import one_exchange

    with one_exchange(conn):  # the plan pinned: the lease index, never a scan
        conn.execute(sql("pin_plans"))
        cur = conn.execute(sql("held_claims"), {"tokens": array_literal(tokens)})
    return [(int(job_id), str(token)) for job_id, token in cur.fetchall()]


def lost_claims(
    conn: psycopg.Connection[Any], claims: Sequence[tuple[int, str]]
) -> dict[int, tuple[str, bool]]:
    """Of these (id, token) claims, those that no longer hold their job, with
    the job's state now (`CANCELLED` when an operator cancelled it; a
    completed job is read in its finished part) and whether the outcome the
    job holds is this claim's own (its answer lost with the connection, the
    outcome sent again and refused by the fence)."""
    if not claims:
        return {}
    ids, tokens = _unzip(claims, 2)
    rows = conn.execute(sql("lost_claims"), {"ids": ids, "tokens": tokens}).fetchall()
    return {int(job_id): (str(state), bool(own)) for job_id, state, own in rows}
