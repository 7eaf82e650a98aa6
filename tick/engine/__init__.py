"""The engine every driver calls (SPEC §6, §6.2).

    api.py          its face: Engine, tick()
    spec.py         what a run is given: RunSpec, Observer, Connect, Maintenance
    coordinator.py  one run: the loop that claims, dispatches, waits and records
    parts.py        what the coordinator uses of the Engine (a Protocol)
    claims.py       what the next claim asks for, and when claiming ends
    flush.py        outcomes in flight: batched, sent, settled
    slots.py        the threads that run handlers
    spans.py        tracing (SPEC §21): the run's span and each job's
    outcomes.py     pure rules: a return value's outcome, its label, its state
    context.py, registry.py, report.py, backoff.py   what handlers and drivers use

The face is imported lazily (PEP 562), so the pure modules can be imported
without the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tick.engine.api import Engine, NullObserver, Observer, RunSpec, tick

__all__ = ["Engine", "NullObserver", "Observer", "RunSpec", "tick"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'tick.engine' has no attribute {name!r}")
    value = getattr(importlib.import_module("tick.engine.api"), name)
    globals()[name] = value
    return value
