"""The benchmark's job kind: a handler that does nothing, so the figures
measure awc and PostgreSQL, not the work."""

from __future__ import annotations

from typing import Any

from tick import JobContext, handler


@handler("noop")
def noop(ctx: JobContext, payload: Any) -> None:
    return None
