"""The claim's cursor (SPEC §24, docs/decisions/0027): where this claimer's
next walk of the ready index starts.

A claim walks jobs_ready_idx in claim order, (-priority, run_at, id). Under a
pinned xmin horizon the entries of every job claimed since the pin stay in
that index, in front of the live ones; walked from its start, a claim would
cost more with each job processed. Each claim therefore returns a mark: the
key before the first job it saw ready and left (or past the last it took),
its snapshot, and, if the walk passed over jobs due later, the key to come
back to and when. The next claim walks from the mark, and finds the jobs
made ready behind it since (a late commit, a retry, a rescue) through the
transactions that snapshot could not see.

A new process has no mark of its own, and its first walk from the start
would pass an entry for every job claimed since the pin. So a run that
claimed without a filter leaves its whole cursor (mark, snapshot, rewind) on
its history row, and a new process starts from the newest (`seed`). That is
exact for the same reason the mark is: what a cursor promises (every job
ready in its snapshot and before it was taken; those due later are behind
the rewind) is a fact about the database at that snapshot, not about the
claimer that kept it, and the probe finds whatever was made ready since. A
filtered claimer's cursor promises it only for its filter, so it is neither
left nor taken.

Pure bookkeeping: the statement computes the mark; this keeps it between
claims and turns it into the next claim's parameters. A claim that fails
leaves the mark as it was, so nothing it saw is skipped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tick.history import NO_SEED
from tick.text import text_refusal

# A key of jobs_ready_idx: (-priority, run_at as the server's text, id), and
# run_at in epoch seconds (±inf for an infinite one) to order keys here.
Key = tuple[int, str, int, float]
# Before every key: -priority is a smallint negated (> -2^31).
START: Key = (-(2**31), "-infinity", 0, float("-inf"))


def _key(value: list[Any]) -> Key:
    return (int(value[0]), str(value[1]), int(value[2]), float(value[3]))


def _order(key: Key) -> tuple[int, float, int]:
    return (key[0], key[3], key[2])


def key_cursors(stored: str) -> str:
    """The key cursors a history row keeps, as the fair claim takes them: a
    JSON object of keys by priority (and `~`, the priorities most recently
    served first), or (a row from before they were kept by priority) one
    key, then the cursor of every priority. Anything else (a row written by
    hand, or by another version) starts every rotation afresh: taken as one
    key, a JSON text of cursors nested itself a level deeper each run, and
    twice the size (84 MB, 3 s a tick, within hours)."""
    try:
        got = json.loads(stored)
    except (ValueError, RecursionError):
        got = None
    if isinstance(got, dict):
        return stored if _well_formed(got) else "{}"
    return json.dumps({"*": stored}) if len(stored) <= KEY_MAX else "{}"


KEY_MAX = 200  # a key's longest (SPEC §23)


def _well_formed(cursors: dict[str, Any]) -> bool:
    """Whether `cursors` is an object the fair claim writes: keys by
    priority (an integer's text), `*` a key, `~` at most 64 priorities."""
    if len(cursors) > 66:
        return False
    for name, value in cursors.items():
        if name == "~":
            if not (isinstance(value, list) and len(value) <= 64
                    and all(isinstance(p, str) and _PRIORITY.fullmatch(p) for p in value)):
                return False
        # A key the table could hold: a NUL or a lone surrogate reads as
        # JSON here and is refused by jsonb in the claim, every claim after.
        elif not (text_refusal(value, KEY_MAX) is None
                  and (name == "*" or _PRIORITY.fullmatch(name))):
            return False
    return True


_PRIORITY = re.compile(r"-?[0-9]{1,6}", re.ASCII)


@dataclass(slots=True)
class Cursor:
    """One claimer's cursor. Coordinator thread only."""

    after: Key = START
    xmax: str | None = None  # the last claim's snapshot: None before any
    xip: list[str] = field(default_factory=list)
    rewind: Key | None = None  # the first key passed over with jobs due later
    rewind_at: float = 0.0  # monotonic instant the first of those is due
    # The fair claim's key cursors (SPEC §23, decision 0034), one per
    # priority, as the JSON text the claim takes and gives back: the last key
    # served at each; the next claim of that priority starts with the key
    # after it ('' : from the start, or after the jobs without a key, which
    # are the key ''). `key_cursors` reads one a run left.
    key_after: str = "{}"
    key_moved: bool = False  # a fair claim set `key_after` in this run
    # The last fair claim found a ready key for every slot (or none has
    # answered yet): the next full fair claim reads the keys' heads in one
    # pass before its walk of keys (decision 0034); with fewer keys than
    # slots (one tenant's flood) that pass would find too few every time.
    key_pass: bool = True

    def params(self, now: float) -> dict[str, Any]:
        """The next claim's cursor parameters; a rewind that is due moves
        the cursor back first."""
        if self.rewind is not None and now >= self.rewind_at:
            self.after = min(self.after, self.rewind, key=_order)
            self.rewind = None
        return {"after_p": self.after[0], "after_r": self.after[1], "after_i": self.after[2],
                "xmax": self.xmax, "xip": self.xip, "key_after": self.key_after,
                "key_pass": self.key_pass}

    def seed(self, row: Sequence[Any] | None, now: float) -> None:
        """Start from the cursor a run left (claim_seed.sql's row, None if
        none), unless this one has moved already."""
        if row is None or self.xmax is not None:
            return
        p, r, i, epoch, xmax, xip, rp, rr, ri, repoch, rewind_in = row
        self.after = _key([p, r, i, epoch])
        self.xmax, self.xip = str(xmax), [str(x) for x in xip or ()]
        if rp is not None and rr is not None and ri is not None:
            self.rewind = _key([rp, rr, ri, repoch])
            self.rewind_at = now + (0.0 if rewind_in is None else float(rewind_in))

    def seed_key(self, key_after: str | None) -> None:
        """Go on with the rotation across keys where the last run left it
        (claim_key_seed.sql's key, None if none), unless this one has
        served keys already (SPEC §23)."""
        if key_after is not None and not self.key_moved:
            self.key_after = key_cursors(key_after)

    def served_key(self, key: str) -> None:
        """A fair claim served keys up to `key`: the next starts after it."""
        self.key_after, self.key_moved = key, True

    def left(self, now: float) -> dict[str, Any]:
        """This cursor as a history row keeps it for the next process
        (finish_tick, record_tick): all None before any claim."""
        # SPEC §23: the key cursor too, once a fair claim moved it ('' is a
        # cursor: after the jobs without a key; it was taken for none, and
        # the next process started from an older run's key, every time).
        key_after = self.key_after if self.key_moved else None
        if self.xmax is None:
            return {**NO_SEED, "key_after": key_after}
        rewind = self.rewind
        return {"seed_p": self.after[0], "seed_r": self.after[1], "seed_i": self.after[2],
                "seed_xmax": self.xmax, "seed_xip": list(self.xip),
                "rewind_p": None if rewind is None else rewind[0],
                "rewind_r": None if rewind is None else rewind[1],
                "rewind_i": None if rewind is None else rewind[2],
                "rewind_in": None if rewind is None else self.rewind_at - now,
                "key_after": key_after}

    def moved(self, mark: str | None, now: float) -> None:
        """A claim committed and returned `mark` (JSON text)."""
        if mark is None:
            return
        got = json.loads(mark)
        self.after = _key(got["after"])
        self.xmax = got["xmax"]
        self.xip = list(got["xip"] or [])
        if got.get("rewind") is not None:
            back = _key(got["rewind"])
            at = now + float(got["rewind_in"])
            if self.rewind is None:
                self.rewind, self.rewind_at = back, at
            else:
                self.rewind = min(self.rewind, back, key=_order)
                self.rewind_at = min(self.rewind_at, at)
