-- A whole tick's row at once (SPEC §16): a loop's busy stretch or idle
-- interval when it ends, or a tick that failed before it had a row.
-- A stretch's row rides at the end of the round trip whose claim may end the
-- stretch: as in finish_tick.sql, it is written only if that round trip's
-- claim took no job. Sent on its own (no claim), it is written.
-- Its start and deadline come as durations, made instants on the database's
-- clock (finished_at's): a host's clock may disagree with it. A failed
-- tick whose opening may have been written before its connection was lost
-- (its key, `row_key`, migration 0033) completes that row: one row a tick.
INSERT INTO awc.ticks (driver, worker_id, correlation_id, started_at, finished_at, deadline_at,
                       claimed, completed, retried, failed, cancelled, released, discarded,
                       continued, rescued, pruned, fired, stop_reason, error, cursor,
                       key_after, row_key)
SELECT %(driver)s, %(worker_id)s, %(correlation_id)s,
       now() - make_interval(secs => coalesce(%(ran_secs)s::float8, 0)), now(),
       now() + make_interval(secs => %(deadline_secs)s::float8),
       %(claimed)s, %(completed)s, %(retried)s, %(failed)s, %(cancelled)s, %(released)s,
       %(discarded)s, %(continued)s, %(rescued)s, %(pruned)s, %(fired)s, %(stop_reason)s, %(error)s,
       -- SPEC §24: the claimer's cursor, where the next process starts (0027).
       awc.seed_of(
        %(seed_p)s::int, %(seed_r)s::timestamptz, %(seed_i)s::bigint,
        %(seed_xmax)s::text::xid8, %(seed_xip)s::text[]::xid8[],
        %(rewind_p)s::int, %(rewind_r)s::timestamptz, %(rewind_i)s::bigint,
        %(rewind_in)s::float8),
       %(key_after)s::text,  -- SPEC §23: the fair claim's key cursor
       %(row_key)s::uuid
-- awc.claimed: the jobs this transaction's claim took (SPEC §24: counted,
-- never a walk of the running jobs).
WHERE coalesce(nullif(current_setting('awc.claimed', true), ''), '0')::int = 0
  -- Nor are ready jobs held back by a limit (SPEC §18): the stretch goes on.
  AND NOT coalesce(nullif(current_setting('awc.held_back', true), '')::boolean, false)
ON CONFLICT (row_key) WHERE row_key IS NOT NULL DO UPDATE
    SET finished_at = EXCLUDED.finished_at, claimed = EXCLUDED.claimed,
        completed = EXCLUDED.completed, retried = EXCLUDED.retried, failed = EXCLUDED.failed,
        cancelled = EXCLUDED.cancelled, released = EXCLUDED.released,
        discarded = EXCLUDED.discarded, continued = EXCLUDED.continued,
        rescued = EXCLUDED.rescued, pruned = EXCLUDED.pruned, fired = EXCLUDED.fired,
        stop_reason = EXCLUDED.stop_reason, error = EXCLUDED.error
RETURNING id
