-- Prune (SPEC §7.3): delete one batch of COMPLETED and CANCELLED jobs finished
-- longer ago than the retention. FAILED, PENDING and RUNNING are never touched,
-- nor a parent a live child still needs.
WITH old AS (
    SELECT id
    FROM ONLY awc.jobs
    WHERE state IN ('COMPLETED', 'CANCELLED')
      AND finished_at < now() - make_interval(secs => %(after_secs)s::float8)
      -- A parent stays while a child not yet final may read it (SPEC §20:
      -- ctx.parents()); has_children spares every other job the lookup.
      AND (NOT has_children OR NOT EXISTS (
          SELECT 1 FROM awc.job_parents AS e JOIN awc.jobs AS c ON c.id = e.child_id
          WHERE e.parent_id = awc.jobs.id AND c.state IN ('PENDING', 'RUNNING')))
    ORDER BY finished_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM ONLY awc.jobs AS j
    USING old
    WHERE j.id = old.id
    RETURNING j.id
), edges AS (
    -- A pruned child's edges to its parents (SPEC §20) go with it.
    DELETE FROM awc.job_parents AS e USING gone WHERE e.child_id = gone.id
)
SELECT id FROM gone
