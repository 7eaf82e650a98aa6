-- The parents named by an enqueue's `after` (SPEC §20), each with its state,
-- locked in id order until the producer commits. A parent that reaches its
-- final state meanwhile does so before this lock (its state is read here) or
-- after the child's edges are committed (its trigger finds the child): never
-- in between, where the child would wait for it forever.
--
-- Only when every one of them exists (`present`, read once before any row
-- is locked): a call refused for a missing parent leaves the producer's
-- transaction holding none of the others. A parent completed while its
-- lock waited has moved to a finished part this snapshot cannot see: it is
-- not returned, and the caller reads it again (tick/parents.py).
WITH present AS MATERIALIZED (
    SELECT count(*) AS n FROM awc.jobs WHERE id = ANY (%(ids)s::bigint[])
)
SELECT j.id, j.state
FROM awc.jobs AS j
WHERE j.id = ANY (%(ids)s::bigint[])
  AND (SELECT n FROM present) = cardinality(%(ids)s::bigint[])
ORDER BY j.id
FOR NO KEY UPDATE OF j
