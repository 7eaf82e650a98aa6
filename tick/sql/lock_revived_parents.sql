-- Before a retry counts what the jobs it revives wait for (SPEC §20,
-- docs/decisions/0033): lock, FOR SHARE, the parents not yet final of every
-- job whose count it sets (those asked for, the cancelled jobs below them,
-- and the children of all of these, which tick/sql/recount_waiting.sql and
-- the revival count again). A parent's outcome counts down only the
-- children it sees PENDING or RUNNING: one committed while a retry ran saw
-- the revived child still CANCELLED and passed it by, and the child,
-- counted by the retry with that parent unfinished, waited for ever (a
-- lattice retried as an independent parent of one layer completed: 700
-- jobs stuck); a child it did count down was counted again from a snapshot
-- before that, and waited for a parent already done. Locked, the parent's
-- outcome waits for the retry's commit and then counts the child as the
-- retry left it, or the retry waits for the outcome's and counts it final.
-- Taken before the retry changes any row; a tick's round trip may hold one
-- parent while it waits for another (locks are taken in id order within a
-- statement, not across its statements): PostgreSQL then ends one of the
-- two, and the caller runs its transaction again (tick.bulk.in_transaction).
-- A claim passes a parent so locked by (SKIP LOCKED).
WITH RECURSIVE revived AS (
    SELECT x.id FROM unnest(%(ids)s::bigint[]) AS x (id)
    UNION
    SELECT e.child_id
    FROM revived AS r
    JOIN awc.job_parents AS e ON e.parent_id = r.id
    JOIN ONLY awc.jobs AS c ON c.id = e.child_id
    WHERE c.state || '' = 'CANCELLED'  -- by key, never the finished jobs' index
), counted AS (
    SELECT r.id FROM revived AS r
    UNION
    SELECT e.child_id FROM awc.job_parents AS e WHERE e.parent_id IN (SELECT id FROM revived)
)
SELECT p.id
FROM ONLY awc.jobs AS p
WHERE p.id = ANY (ARRAY(SELECT DISTINCT e.parent_id FROM awc.job_parents AS e
                        WHERE e.child_id IN (SELECT id FROM counted)))
  AND p.state IN ('PENDING', 'RUNNING')
ORDER BY p.id
FOR SHARE OF p
