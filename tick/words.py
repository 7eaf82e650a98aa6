"""awc's shared vocabulary, spelled once (SPEC §4, §6, §9, §15, §16, §18).

A leaf: it imports nothing of awc, so every floor of the house can read it.
Each closed set of words that more than one module spells is a `Literal`
here with the tuple of its values beside it; whoever adds a state, a driver
or an outcome adds it here and nowhere else. The SQL files keep their own
literals (tests/test_words.py checks the states they name are these).
"""

from __future__ import annotations

from enum import Enum
from typing import Literal, get_args

# A job's state (SPEC §4), in the order the console and the CLI list them.
JobState = Literal["PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED"]
JOB_STATES: tuple[JobState, ...] = get_args(JobState)
# A job still to run or running: an operator may cancel it.
LIVE_STATES: tuple[JobState, ...] = ("PENDING", "RUNNING")
# A dead letter, failed or cancelled: an operator may retry it.
DEAD_STATES: tuple[JobState, ...] = ("FAILED", "CANCELLED")
# A job that will never run again: an operator may discard it.
FINISHED_STATES: tuple[JobState, ...] = ("FAILED", "CANCELLED", "COMPLETED")

# What an operator may do to jobs (SPEC §22), and the word for it done.
JobAction = Literal["retry", "cancel", "discard"]
JOB_ACTIONS: tuple[JobAction, ...] = get_args(JobAction)
ACTION_DONE: dict[JobAction, str] = {
    "retry": "retried",
    "cancel": "cancelled",
    "discard": "discarded",
}

# What ran the engine, as the tick history records it (SPEC §16).
Driver = Literal["tick", "loop", "lambda", "maintenance"]
DRIVERS: tuple[Driver, ...] = get_args(Driver)


class Record(Enum):
    """The fenced statement that records an outcome (SPEC §4.2)."""

    COMPLETE = "complete_jobs"
    RETRY = "retry_jobs"
    FAIL = "fail_jobs"
    RELEASE = "release_jobs"
    CONTINUE = "continue_jobs"


# What a processed job's outcome did (SPEC §9 `outcome`); `released` is a
# job handed back unfinished (attempt refunded), as the report counts it (§6).
Label = Literal["completed", "retried", "failed", "cancelled", "discarded", "continued", "released"]
LABELS: tuple[Label, ...] = get_args(Label)
# The report's field that counts each label (SPEC §6): the label itself.
REPORT_FIELD: dict[Label, str] = {label: label for label in LABELS}
# The level of a job's event, by its label (SPEC §9).
LEVEL: dict[Label, str] = {
    "completed": "info",
    "retried": "warning",
    "discarded": "warning",
    "failed": "error",
    "cancelled": "error",
    "continued": "info",
    "released": "info",
}

# Why a tick stopped (SPEC §6 `stop_reason`).
StopReason = Literal["drained", "max_jobs", "deadline", "stopped"]
STOP_REASONS: tuple[StopReason, ...] = get_args(StopReason)

# What became of one schedule fire, as its ledger records it (SPEC §15).
FireStatus = Literal["enqueued", "skipped", "missed", "overlap", "manual"]
FIRE_STATUSES: tuple[FireStatus, ...] = get_args(FireStatus)
# A fire that was due and ran no job: shown as a problem.
UNRUN_FIRES: tuple[FireStatus, ...] = ("missed", "overlap")
# A schedule's policies (SPEC §15): which missed fires run, and whether a
# fire may enqueue while the previous one's job is live; the first is the default.
MissedPolicy = Literal["latest", "all"]
MISSED_POLICIES: tuple[MissedPolicy, ...] = get_args(MissedPolicy)
OverlapPolicy = Literal["allow", "skip"]
OVERLAP_POLICIES: tuple[OverlapPolicy, ...] = get_args(OverlapPolicy)

# What a limit applies to (SPEC §18): every job of a kind, or of a queue.
LimitScope = Literal["kind", "queue"]
LIMIT_SCOPES: tuple[LimitScope, ...] = get_args(LimitScope)
# Per-key limits (SPEC §23): one key or every key ("key"), or every key
# within one kind ("kind_key", set as `kind:NAME --per-key`).
KeyLimitScope = Literal["key", "kind_key"]
KEY_LIMIT_SCOPES: tuple[KeyLimitScope, ...] = get_args(KeyLimitScope)
