-- `awc jobs discard` and the console's Discard (SPEC §22): delete the
-- FAILED, CANCELLED or COMPLETED jobs among %(ids)s; a job that left those
-- states meanwhile (a retry) stays, and so does a parent a child not yet
-- final needs (SPEC §20, §22: its ctx.parents() reads the parent's result,
-- a retry of the parent revives it), as the prune spares it. Their error
-- histories and walk journals go with them. The count deleted.
WITH discarded AS (
    DELETE FROM awc.jobs AS j
    WHERE j.id = ANY(%(ids)s::bigint[])
      AND j.state IN ('FAILED', 'CANCELLED', 'COMPLETED')
      AND (NOT j.has_children OR NOT EXISTS (
          SELECT 1 FROM awc.job_parents AS e JOIN ONLY awc.jobs AS c ON c.id = e.child_id
          WHERE e.parent_id = j.id AND c.state IN ('PENDING', 'RUNNING')))
    RETURNING j.id
), edges AS (
    DELETE FROM awc.job_parents AS e USING discarded WHERE e.child_id = discarded.id
)
SELECT count(*) FROM discarded
