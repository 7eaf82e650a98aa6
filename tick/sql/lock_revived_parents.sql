-- Before a retry counts what the jobs it revives wait for (SPEC §20,
-- docs/decisions/0033): lock, FOR SHARE, the parents not yet final of every
-- job it may revive (those asked for, and the cancelled jobs below them).
-- A parent's outcome counts down only the children it sees PENDING or
-- RUNNING: one committed while a retry ran saw the revived child still
-- CANCELLED and passed it by, and the child, counted by the retry with that
-- parent unfinished, waited for ever (a lattice retried while an
-- independent parent of one layer completed: 700 jobs stuck). Locked, the
-- parent's outcome waits for the retry's commit and then sees the child
-- revived, or the retry waits for the outcome's and then counts it final.
-- Taken before the retry changes any row, so it holds no lock an outcome
-- waits for while it waits; a claim passes a locked parent by (SKIP LOCKED).
WITH RECURSIVE revived AS (
    SELECT x.id FROM unnest(%(ids)s::bigint[]) AS x (id)
    UNION
    SELECT e.child_id
    FROM revived AS r
    JOIN awc.job_parents AS e ON e.parent_id = r.id
    JOIN ONLY awc.jobs AS c ON c.id = e.child_id
    WHERE c.state || '' = 'CANCELLED'  -- by key, never the finished jobs' index
)
SELECT p.id
FROM ONLY awc.jobs AS p
WHERE p.id = ANY (ARRAY(SELECT DISTINCT e.parent_id FROM awc.job_parents AS e
                        WHERE e.child_id IN (SELECT id FROM revived)))
  AND p.state IN ('PENDING', 'RUNNING')
ORDER BY p.id
FOR SHARE OF p
