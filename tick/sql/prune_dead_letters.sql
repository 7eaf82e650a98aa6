-- Retention of dead letters (SPEC §22, AWC_DEAD_LETTER_RETENTION_SECS): delete
-- one batch of FAILED jobs finished longer ago than the retention, oldest
-- first, read from jobs_failed_finished_idx. Unset, this never runs.
WITH old AS (
    SELECT id
    FROM ONLY awc.jobs
    WHERE state = 'FAILED'
      AND finished_at < now() - make_interval(secs => %(after_secs)s::float8)
    ORDER BY finished_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
DELETE FROM ONLY awc.jobs AS j
USING old
WHERE j.id = old.id
