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

Pure bookkeeping: the statement computes the mark; this keeps it between
claims and turns it into the next claim's parameters. A claim that fails
leaves the mark as it was, so nothing it saw is skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

# A key of jobs_ready_idx: (-priority, run_at as the server's text, id), and
# run_at in epoch seconds (±inf for an infinite one) to order keys here.
Key = tuple[int, str, int, float]
# Before every key: -priority is a smallint negated (> -2^31).
START: Key = (-(2**31), "-infinity", 0, float("-inf"))


def _key(value: list[Any]) -> Key:
    return (int(value[0]), str(value[1]), int(value[2]), float(value[3]))


def _order(key: Key) -> tuple[int, float, int]:
    return (key[0], key[3], key[2])


@dataclass(slots=True)
class Cursor:
    """One claimer's cursor. Coordinator thread only."""

    after: Key = START
    xmax: str | None = None  # the last claim's snapshot: None before any
    xip: list[str] = field(default_factory=list)
    rewind: Key | None = None  # the first key passed over with jobs due later
    rewind_at: float = 0.0  # monotonic instant the first of those is due
    # The fair claim's key cursor (SPEC §23, decision 0034): the last key it
    # served; the next claim starts with the key after it ('' : from the start).
    key_after: str = ""

    def params(self, now: float) -> dict[str, Any]:
        """The next claim's cursor parameters; a rewind that is due moves
        the cursor back first."""
        if self.rewind is not None and now >= self.rewind_at:
            self.after = min(self.after, self.rewind, key=_order)
            self.rewind = None
        return {"after_p": self.after[0], "after_r": self.after[1], "after_i": self.after[2],
                "xmax": self.xmax, "xip": self.xip, "key_after": self.key_after}

    def moved(self, mark: str | None, now: float) -> None:
        """A claim committed and returned `mark` (JSON text)."""
        if mark is None:
            return
        got = json.loads(mark)
        self.after = _key(got["after"])
        self.xmax = got["xmax"]
        self.xip = list(got["xip"] or [])
        if got.get("key") is not None:
            self.key_after = str(got["key"])
        if got.get("rewind") is not None:
            back = _key(got["rewind"])
            at = now + float(got["rewind_in"])
            if self.rewind is None:
                self.rewind, self.rewind_at = back, at
            else:
                self.rewind = min(self.rewind, back, key=_order)
                self.rewind_at = min(self.rewind_at, at)
