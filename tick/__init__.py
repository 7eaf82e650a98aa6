"""awc: a batch tick executor for PostgreSQL job queues.

The public API is imported lazily (PEP 562), so `awc tick` and the Lambda
entry pay only for what they use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tick.context import JobCancelled, JobContext, LeaseLost
    from tick.outcomes import Complete, Fail, Retry
    from tick.queue import enqueue, enqueue_many
    from tick.registry import handler
    from tick.report import TickReport
    from tick.run_once import tick

__all__ = [
    "Complete",
    "Fail",
    "JobCancelled",
    "JobContext",
    "LeaseLost",
    "Retry",
    "TickReport",
    "enqueue",
    "enqueue_many",
    "handler",
    "tick",
]

_HOME = {
    "Complete": "tick.outcomes",
    "Fail": "tick.outcomes",
    "Retry": "tick.outcomes",
    "JobCancelled": "tick.context",
    "JobContext": "tick.context",
    "LeaseLost": "tick.context",
    "enqueue": "tick.queue",
    "enqueue_many": "tick.queue",
    "handler": "tick.registry",
    "TickReport": "tick.report",
    "tick": "tick.run_once",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'tick' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
