-- The fair claim's gate (SPEC §23, docs/decisions/0034), sent in its place
-- when the last claim was not the fair claim: whether a job with a key is
-- ready and no global limit may bind (SPEC §18: step 2 claimed nothing and
-- left `awc.walk`), in one probe of jobs_keyed_idx and a plan a fraction of
-- the fair claim's. If so, the plain walk after it claims nothing
-- (`awc.keyed_claimed` 0) and the engine sends the fair claim at once: no
-- keyed job is taken outside the round-robin. Otherwise it leaves -1 and the
-- walk claims as it did before keys existed. One row: whether a keyed job
-- is ready.
WITH g AS MATERIALIZED (  -- worked out once: the probe is read once
    SELECT (cardinality(coalesce(nullif(current_setting('awc.limited_kinds', true), ''),
                                 '{}')::text[])
            + cardinality(coalesce(nullif(current_setting('awc.limited_queues', true), ''),
                                   '{}')::text[]) = 0
            OR coalesce(nullif(current_setting('awc.walk', true), ''), 'false')::boolean)
           AND cardinality(%(slots)s::text[]) > 0
           AND EXISTS (SELECT 1 FROM ONLY awc.jobs AS j
                       WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.key IS NOT NULL
                         AND j.run_at <= now()) AS go
)
SELECT g.go
FROM g
WHERE set_config('awc.keyed_claimed', CASE WHEN g.go THEN '0' ELSE '-1' END, true) IS NOT NULL
