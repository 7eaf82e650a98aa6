-- Prune (SPEC §7.3): delete one batch of COMPLETED and CANCELLED jobs finished
-- longer ago than the retention. FAILED, PENDING and RUNNING are never touched.
WITH old AS (
    SELECT id
    FROM ONLY awc.jobs
    WHERE state IN ('COMPLETED', 'CANCELLED')
      AND finished_at < now() - make_interval(secs => %(after_secs)s::float8)
    ORDER BY finished_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
DELETE FROM ONLY awc.jobs AS j
USING old
WHERE j.id = old.id
