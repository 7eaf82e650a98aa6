-- Complete a tick's row of the history (SPEC §16) with its report, or its error.
-- It rides at the end of the round trip that may be the tick's last (§16: no
-- round trip of its own): %(slots)s are the slots that round trip's claim
-- asked to fill, and the row is completed only if none of them was filled in
-- this transaction (updated_at = now()), i.e. the claim came back empty and
-- the tick ends. Sent on its own, %(slots)s is empty and the row is completed.
UPDATE awc.ticks
SET finished_at = now(), claimed = %(claimed)s, completed = %(completed)s,
    retried = %(retried)s, failed = %(failed)s, cancelled = %(cancelled)s,
    released = %(released)s, discarded = %(discarded)s, continued = %(continued)s,
    rescued = %(rescued)s,
    pruned = %(pruned)s, fired = %(fired)s, stop_reason = %(stop_reason)s, error = %(error)s
WHERE id = %(id)s
  AND NOT EXISTS (
      SELECT 1 FROM awc.jobs
      WHERE locked_until IS NOT NULL  -- jobs_lease_idx: the running jobs only
        AND updated_at = now()
        AND locked_by = ANY (%(slots)s::text[]))
  -- Nor are ready jobs held back by a limit (SPEC §18): the run goes on.
  AND NOT coalesce(nullif(current_setting('awc.held_back', true), '')::boolean, false)
RETURNING id
