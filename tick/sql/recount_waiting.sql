-- After an operator's retry (SPEC §20, §22), revive_jobs.sql and
-- revive_descendants.sql: every PENDING job among the revived (%(ids)s) and
-- their children waits for exactly its parents not final now (a child still
-- RUNNING too: should its run end in a retry, it waits, migration 0032). The revived
-- jobs counted their parents at their own rows, in the statement's order:
-- when one statement revives a job and its parent (a bulk retry of a
-- cascade's cancelled jobs, or of a fan-in's failed parents), a child
-- counted the parent at its row and again when the parent's descendants
-- were revived, or not at all, and a chain so revived waited for ever
-- (decision 0033). Counted once more here, by key, in the retry's
-- transaction. The ids whose count changed.
WITH affected AS MATERIALIZED (
    SELECT x.id FROM unnest(%(ids)s::bigint[]) AS x (id)
    UNION
    SELECT e.child_id FROM awc.job_parents AS e WHERE e.parent_id = ANY (%(ids)s::bigint[])
), counted AS MATERIALIZED (
    SELECT c.id,
           (SELECT count(*) FROM awc.job_parents AS e
            JOIN ONLY awc.jobs AS p ON p.id = e.parent_id
            WHERE e.child_id = c.id
              AND p.state NOT IN ('COMPLETED', 'FAILED', 'CANCELLED'))::integer AS unfinished
    FROM ONLY awc.jobs AS c
    WHERE c.id = ANY (ARRAY(SELECT id FROM affected)) AND c.state IN ('PENDING', 'RUNNING')
)
UPDATE ONLY awc.jobs AS c
SET waiting = k.unfinished
FROM counted AS k
WHERE c.id = k.id AND c.state IN ('PENDING', 'RUNNING') AND c.waiting <> k.unfinished
RETURNING c.id
