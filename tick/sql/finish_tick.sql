-- Complete a tick's row of the history (SPEC §16) with its report, or its error.
-- It rides at the end of the round trip that may be the tick's last (§16: no
-- round trip of its own): the row is completed only if that round trip's
-- claim took no job, i.e. the claim came back empty and the tick ends. Sent
-- on its own (no claim), the row is completed.
UPDATE awc.ticks
SET finished_at = now(), claimed = %(claimed)s, completed = %(completed)s,
    retried = %(retried)s, failed = %(failed)s, cancelled = %(cancelled)s,
    released = %(released)s, discarded = %(discarded)s, continued = %(continued)s,
    rescued = %(rescued)s,
    pruned = %(pruned)s, fired = %(fired)s, stop_reason = %(stop_reason)s, error = %(error)s,
    -- SPEC §24: the claimer's cursor, where the next process's first claim
    -- starts (decision 0027); a run that has none keeps what the row holds.
    cursor = coalesce(awc.seed_of(
        %(seed_p)s::int, %(seed_r)s::timestamptz, %(seed_i)s::bigint,
        %(seed_xmax)s::text::xid8, %(seed_xip)s::text[]::xid8[],
        %(rewind_p)s::int, %(rewind_r)s::timestamptz, %(rewind_i)s::bigint,
        %(rewind_in)s::float8), cursor),
    -- SPEC §23: the fair claim's key cursor, likewise (decision 0034).
    key_after = coalesce(%(key_after)s::text, key_after)
WHERE id = %(id)s
  -- awc.claimed: how many jobs this transaction's claim took (the claim sets
  -- it; unset when none was sent). Counted, never a walk of the running jobs:
  -- under a pinned horizon that walk grows with every job claimed (SPEC §24).
  AND coalesce(nullif(current_setting('awc.claimed', true), ''), '0')::int = 0
  -- Nor are ready jobs held back by a limit (SPEC §18): the run goes on.
  AND NOT coalesce(nullif(current_setting('awc.held_back', true), '')::boolean, false)
RETURNING id
