"""`prune` (SPEC §7.3, §10): prune finished jobs now, as a job."""

from __future__ import annotations

from typing import Any

from tick import Complete, JobContext, handler
from tick.maintenance import prune as prune_jobs

from ..runtime import runtime
from .payloads import PrunePayload


@handler("prune", payload=PrunePayload)
def prune(ctx: JobContext, payload: PrunePayload) -> Any:
    """Delete COMPLETED and CANCELLED jobs older than AWC_PRUNE_AFTER_SECS,
    bounded by the job's remaining time; under the prune lock, so it never
    runs beside the maintenance prune."""
    rt = runtime()
    budget = max(min(ctx.remaining() - 1.0, 30.0), 0.5)
    with rt.connection() as conn:
        pruned = prune_jobs(conn, rt.settings.prune_after_secs, force=True, budget_secs=budget)
    return Complete({"pruned": pruned})
