-- An operator's retry finds the parents it locks by key, whatever the
-- table's statistics (SPEC §20, docs/decisions/0033, "A retry's walk by
-- key").
--
-- tick/sql/lock_revived_parents.sql walks down from the jobs a retry
-- revives through the cancelled jobs below them, one level a step of a
-- recursive query. Planned on the table's statistics, as an operator's
-- session plans, a table never analyzed, or analyzed while it held a few
-- jobs, took each step as a hash join over every edge: the head of a chain
-- of 10,000 read the whole of awc.job_parents 10,000 times (11 s, against
-- 0.18 s by key); a generic plan (a SQL function's, or a prepared
-- statement's) that guessed 10 ids took each step as a walk of every edge
-- with the step before as its inner side (over 60 s). The walk is now this
-- function's: each lookup is a LATERAL subquery of the row before it,
-- fenced (OFFSET 0) so that no plan can turn it into a join and put the
-- whole table on the outer side, and the function turns sequential and
-- bitmap scans off, so each is a probe of job_parents' indexes or the
-- jobs' primary key, whatever the statistics say (a table "of one row"
-- makes a scan of it look cheaper).
CREATE FUNCTION awc.lock_revived_parents(ids bigint[]) RETURNS SETOF bigint
    LANGUAGE sql
    SET enable_seqscan = off SET enable_bitmapscan = off
    SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off
    AS $$
WITH RECURSIVE revived AS (
    -- The jobs asked for, and the cancelled jobs below them.
    SELECT x.id FROM unnest(ids) AS x (id)
    UNION
    SELECT c.id
    FROM revived AS r,
         LATERAL (SELECT e.child_id FROM awc.job_parents AS e
                  WHERE e.parent_id = r.id OFFSET 0) AS e,
         LATERAL (SELECT c.id FROM ONLY awc.jobs AS c
                  WHERE c.id = e.child_id
                    AND c.state || '' = 'CANCELLED'  -- by key, never the finished jobs' index
                  OFFSET 0) AS c
), counted AS (
    -- And their children, which the retry counts again.
    SELECT r.id FROM revived AS r
    UNION
    SELECT e.child_id
    FROM revived AS r,
         LATERAL (SELECT e.child_id FROM awc.job_parents AS e
                  WHERE e.parent_id = r.id OFFSET 0) AS e
)
SELECT p.id
FROM ONLY awc.jobs AS p
WHERE p.id = ANY (ARRAY(SELECT DISTINCT e.parent_id
                        FROM counted AS k,
                             LATERAL (SELECT e.parent_id FROM awc.job_parents AS e
                                      WHERE e.child_id = k.id OFFSET 0) AS e))
  AND p.state IN ('PENDING', 'RUNNING')
ORDER BY p.id
FOR SHARE OF p
$$;
