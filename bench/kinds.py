"""The benchmark's job kind: a handler that does nothing, so the figures
measure awc and PostgreSQL, not the work."""

from __future__ import annotations

from typing import Any

from tick import JobContext, handler


@handler("noop")
def noop(ctx: JobContext, payload: Any) -> None:
    return None


@handler("units")
def units(ctx: JobContext, payload: Any) -> None:
    """`units` steps, each hashing `unit_bytes` (0: no work), checkpointing
    every `every` of them (0: never) (bench.checkpoints)."""
    import hashlib

    total, every = int(payload["units"]), int(payload["every"])
    data = bytes(int(payload["unit_bytes"]))
    for unit in range(1, total + 1):
        if data:
            hashlib.sha256(data).digest()
        if every and unit % every == 0:
            ctx.checkpoint({"next": unit}, progress=unit / total)
