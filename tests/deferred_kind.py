"""A kind registered by name (tests/test_cold_start.py): importing this
module registers its handler, as a built-in kind's module does."""

from __future__ import annotations

from typing import Any

from tick.engine.registry import handler

IMPORTS = ["imported"]  # one entry per execution of this module


@handler("awc_test_deferred", lease_secs=42)
def deferred(ctx: Any, payload: Any) -> str:
    return "ran"
