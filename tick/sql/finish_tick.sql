-- Complete a tick's row of the history (SPEC §16) with its report, or its error.
UPDATE awc.ticks
SET finished_at = now(), claimed = %(claimed)s, completed = %(completed)s,
    retried = %(retried)s, failed = %(failed)s, cancelled = %(cancelled)s,
    released = %(released)s, discarded = %(discarded)s, rescued = %(rescued)s,
    pruned = %(pruned)s, fired = %(fired)s, stop_reason = %(stop_reason)s, error = %(error)s
WHERE id = %(id)s
