-- Before discard_jobs.sql, in the same transaction (SPEC §20, §22): lock the
-- final jobs among %(ids)s, in id order. A producer naming one as a parent
-- holds its row until its commit; the discard's check for children not yet
-- final, in a statement of its own after this one, then reads that commit.
-- In one statement the check read a snapshot from before the wait, missed
-- the new child, and deleted the completed parent it needs.
SELECT j.id
FROM awc.jobs AS j
WHERE j.id = ANY (%(ids)s::bigint[]) AND j.state IN ('FAILED', 'CANCELLED', 'COMPLETED')
ORDER BY j.id
FOR UPDATE
