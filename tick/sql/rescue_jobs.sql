-- Rescue (SPEC §4.2): RUNNING jobs whose lease expired go back to PENDING,
-- claimable at once and keeping their place, or to FAILED once their attempts
-- are spent, so a job that kills its worker cannot loop forever. Bounded.
-- The lost lease is a failed run: it joins the job's error history (SPEC §22).
-- Only under the rescue lock (%(key)s), which try_lock.sql took earlier in
-- this transaction when it could: taken again it answers at once, and
-- nothing is rescued when another process holds it.
WITH expired AS (
    SELECT id
    FROM ONLY awc.jobs
    WHERE (SELECT pg_try_advisory_xact_lock(%(key)s::bigint))
      AND state = 'RUNNING'
      AND locked_until < now()
    ORDER BY locked_until
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE ONLY awc.jobs AS j
SET state = CASE WHEN j.attempts >= j.max_attempts THEN 'FAILED' ELSE 'PENDING' END,
    finished_at = CASE WHEN j.attempts >= j.max_attempts THEN now() END,
    last_error = 'LeaseExpired: lease expired before an outcome was recorded',
    -- SPEC §22: this failed run joins the job's error history, the 20 newest kept.
    errors = jsonb_path_query_array(
        j.errors || jsonb_build_array(jsonb_strip_nulls(jsonb_build_object(
            'attempt', j.attempts,
            'at', now(),
            'error', 'LeaseExpired: lease expired before an outcome was recorded'))),
        '$[last - 19 to last]'),
    locked_by = NULL,
    locked_until = NULL,
    claim_token = NULL,
    updated_at = now()
FROM expired
WHERE j.id = expired.id
RETURNING j.id, j.state
