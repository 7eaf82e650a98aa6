-- `awc jobs discard` and the console's Discard (SPEC §22): delete the
-- FAILED, CANCELLED or COMPLETED jobs among %(ids)s; a job that left those
-- states meanwhile (a retry) stays. Their error histories and walk journals
-- go with them, as with the prune. The count deleted.
WITH discarded AS (
    DELETE FROM awc.jobs
    WHERE id = ANY(%(ids)s::bigint[])
      AND state IN ('FAILED', 'CANCELLED', 'COMPLETED')
    RETURNING id
), edges AS (
    DELETE FROM awc.job_parents AS e USING discarded WHERE e.child_id = discarded.id
)
SELECT count(*) FROM discarded
