"""awc: a batch tick executor for PostgreSQL job queues.

The public API is imported lazily (PEP 562), so `awc tick` and the Lambda
entry pay only for what they use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tick.engine.api import tick
    from tick.engine.context import JobCancelled, JobContext, LeaseLost
    from tick.engine.outcomes import Complete, Continue, Fail, Retry
    from tick.engine.registry import handler
    from tick.errors import EnqueueError
    from tick.producer import enqueue, enqueue_many
    from tick.report import TickReport
    from tick.waiting import JobOutcome, wait

__all__ = [
    "Complete",
    "Continue",
    "EnqueueError",
    "Fail",
    "JobCancelled",
    "JobContext",
    "JobOutcome",
    "LeaseLost",
    "Retry",
    "TickReport",
    "enqueue",
    "enqueue_many",
    "handler",
    "tick",
    "wait",
]

_HOME = {
    "Complete": "tick.engine.outcomes",
    "Continue": "tick.engine.outcomes",
    "Fail": "tick.engine.outcomes",
    "Retry": "tick.engine.outcomes",
    "JobCancelled": "tick.engine.context",
    "JobContext": "tick.engine.context",
    "LeaseLost": "tick.engine.context",
    "enqueue": "tick.producer",
    "enqueue_many": "tick.producer",
    "handler": "tick.engine.registry",
    "TickReport": "tick.report",
    "tick": "tick.engine.api",
    "EnqueueError": "tick.errors",
    "JobOutcome": "tick.waiting",
    "wait": "tick.waiting",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'tick' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
