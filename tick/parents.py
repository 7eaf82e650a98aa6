"""Dependencies as a producer declares them (SPEC §20): `after=[...]` and
`on_parent_failure` on an enqueue, checked by field, then the parents locked,
the jobs inserted and the edges declared, all in the producer's transaction.

Every parent exists when its child is enqueued (an earlier job of the same
`enqueue_many` call is named `"#N"`), so no cycle can ever be built.

Nothing is locked until every parent is known to exist, so a refused call
leaves the producer's transaction holding no lock it took. A parent that a
tick completes while the lock waits for it has left the hot table for a
finished part under the lock's snapshot: it is read again there, by a
statement of its own, before it could be called missing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tick.errors import EnqueueError
from tick.statements import sql
from tick.words import JOB_STATES, LIVE_STATES

if TYPE_CHECKING:
    import psycopg

    from tick.copy_in import GraphMark

MAX_PARENTS = 10_000  # distinct parents of one job (SPEC §20)
POLICIES = ("cancel", "run")
DEPENDENCY_FIELDS = frozenset({"after", "on_parent_failure"})
BIGINT_MAX = 2**63 - 1

# A parent: an existing job's id, or the index of an earlier job of the call.
Parent = int | tuple[str, int]


def _parent(value: Any, own: int | None, field: str) -> Parent:
    """One entry of `after`: a job id, or `"#N"` naming the N-th job of this
    `enqueue_many` call (`own` is the child's index; None for `enqueue`)."""
    if isinstance(value, str):
        if own is None:
            raise EnqueueError(field, '"#N" names a job of the same enqueue_many call')
        digits = value[1:]
        if not value.startswith("#") or not digits.isascii() or not digits.isdigit() \
                or (digits.startswith("0") and digits != "0"):
            raise EnqueueError(field, 'holds a string that is not "#N"')
        # More digits than any call has jobs: refused before int() (which
        # refuses 4,300 digits and more with its own error).
        n = int(digits) if len(digits) <= 18 else BIGINT_MAX
        if n >= own:
            raise EnqueueError(field, f'"#{n if n < BIGINT_MAX else "N"}" is not an earlier '
                                      f"job of this call (this is job {own})")
        return ("#", n)
    if isinstance(value, bool) or not isinstance(value, int):
        raise EnqueueError(field, "must list job ids")
    if not 1 <= value <= BIGINT_MAX:
        raise EnqueueError(field, "names a job id out of range")
    return value


def check_after(after: Any, own: int | None, field: str = "after") -> list[Parent]:
    """`after` as distinct parents (an id named twice counts once), or an
    `EnqueueError` naming `field`."""
    if after is None:
        return []
    if isinstance(after, (str, bytes, Mapping)) or not isinstance(after, (list, tuple)):
        raise EnqueueError(field, "must be a list of job ids")
    seen: dict[Parent, None] = {}
    for value in after:
        seen[_parent(value, own, field)] = None
    if len(seen) > MAX_PARENTS:
        raise EnqueueError(field, f"names more than {MAX_PARENTS} parents")
    return list(seen)


def check_policy(policy: Any, field: str = "on_parent_failure") -> str:
    """The policy, or an `EnqueueError` naming `field`."""
    if not isinstance(policy, str) or policy not in POLICIES:
        raise EnqueueError(field, "must be 'cancel' or 'run'")
    return policy


def wants_parents(jobs: Sequence[Mapping[str, Any]]) -> bool:
    """Whether any job of the call declares a dependency."""
    return any(not DEPENDENCY_FIELDS.isdisjoint(job) for job in jobs)


def enqueue_graph(conn: psycopg.Connection[Any], jobs: Sequence[Mapping[str, Any]],
                  insert: Callable[[list[dict[str, Any]], list[GraphMark]], list[int]],
                  *, single: bool = False) -> list[int]:
    """Enqueue `jobs` with their dependencies: every field checked first,
    the existing parents locked (a missing one refuses the call with nothing
    inserted), the jobs inserted by `insert` with their graph marks (a
    child waiting), then the edges declared. Ids in input order. An error
    names job n's field ("job 3: after") unless the call is `enqueue`'s
    (`single`), where "#N" has nothing to name.

    On an autocommit connection the call is one transaction of its own: its
    statements each committing alone would publish a child before its
    edges (waiting for parents that would never count it down), and lock
    its parents for no time at all."""
    if conn.autocommit:
        with conn.transaction():
            return _enqueue_graph(conn, jobs, insert, single)
    return _enqueue_graph(conn, jobs, insert, single)


def _enqueue_graph(conn: psycopg.Connection[Any], jobs: Sequence[Mapping[str, Any]],
                   insert: Callable[[list[dict[str, Any]], list[GraphMark]], list[int]],
                   single: bool) -> list[int]:
    def prefix(n: int) -> str:
        return "" if single else f"job {n}: "

    plain: list[dict[str, Any]] = []
    wanted: list[tuple[list[Parent], str | None]] = []
    for n, job in enumerate(jobs):
        after = check_after(job.get("after"), None if single else n, prefix(n) + "after")
        policy = (check_policy(job["on_parent_failure"], prefix(n) + "on_parent_failure")
                  if "on_parent_failure" in job else None)
        if after and job.get("dedupe_key") is not None:
            # A dedupe hit returns a job that may already run: it cannot start waiting.
            raise EnqueueError(prefix(n) + "after", "cannot be combined with dedupe_key")
        plain.append({k: v for k, v in job.items() if k not in DEPENDENCY_FIELDS})
        wanted.append((after, policy))
    existing = sorted({p for after, _ in wanted for p in after if isinstance(p, int)})
    states: dict[int, str] = {}
    if existing:
        states = _lock_parents(conn, existing)
        found = set(states)
        if len(found) < len(existing):  # refused, nothing locked: name the parent
            present = {int(row[0]) for row in conn.execute(
                sql("listed_jobs"), {"ids": existing, "states": list(JOB_STATES)})}
            for have, why in ((present, "which does not exist"),
                              (found, "which changed while it was being locked: enqueue "
                                      "again")):
                for n, (after, _) in enumerate(wanted):
                    for parent in after:
                        if isinstance(parent, int) and parent not in have:
                            raise EnqueueError(prefix(n) + "after", f"names job {parent}, {why}")
    ids = insert(plain, _marks(wanted, states))
    # A "#N" whose job carries a dedupe key may be a live job another
    # process holds (the key's holder, returned instead of a new row): it is
    # locked as a parent named by id is, or a tick completing it before this
    # transaction commits would not see the child, left waiting for ever.
    held = sorted({ids[p[1]] for after, _ in wanted for p in after
                   if not isinstance(p, int) and jobs[p[1]].get("dedupe_key") is not None})
    if held:
        _lock_parents(conn, held)
    children: list[int] = []
    parents: list[int] = []
    items: list[int] = []
    policies: list[str] = []
    for job_id, (after, policy) in zip(ids, wanted, strict=True):
        if not after:
            # A policy alone declares nothing; and the id may be a dedupe
            # hit, an existing job whose parents and count are not this
            # call's to rewrite.
            continue
        items.append(job_id)
        policies.append(policy or "cancel")
        for parent in after:
            children.append(job_id)
            parents.append(parent if isinstance(parent, int) else ids[parent[1]])
    if items:
        conn.execute(sql("declare_parents"), {"children": children, "parents": parents,
                                              "ids": items, "policies": policies})
    return ids


def _lock_parents(conn: psycopg.Connection[Any], ids: list[int]) -> dict[int, str]:
    """Lock the parents `ids`, in id order, until the producer commits; the
    ids locked, with their states. None is locked unless all exist (a
    refused call keeps no lock). A parent completed while the lock waited is
    read again, once, in its finished part by a fresh statement."""
    found = {int(row[0]): str(row[1])
             for row in conn.execute(sql("lock_parents"), {"ids": ids})}
    moved = [p for p in ids if p not in found]
    if moved:
        found.update((int(row[0]), str(row[1]))
                     for row in conn.execute(sql("lock_parents"), {"ids": moved}))
    return found


def _marks(wanted: Sequence[tuple[list[Parent], str | None]],
           states: Mapping[int, str]) -> list[GraphMark]:
    """Each job's graph mark as it is inserted: the parents it waits for
    (its earlier jobs of the call, and the existing ones not final as they
    were locked), whether a later job of the call names it, its policy. So a
    child goes in waiting and a parent marked, as declare_parents.sql would
    leave them, and that statement rewrites no row of the call (it still
    does where the guess is wrong: a "#N" that is a dedupe hit named by id as
    well)."""
    named = {p[1] for after, _ in wanted for p in after if not isinstance(p, int)}
    return [(sum(1 for p in after if not isinstance(p, int) or states.get(p) in LIVE_STATES),
             n in named, (policy or "cancel") if after else "cancel")
            for n, (after, policy) in enumerate(wanted)]
