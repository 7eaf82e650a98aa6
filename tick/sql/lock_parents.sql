-- The parents named by an enqueue's `after` (SPEC §20), each with its state,
-- locked in id order until the producer commits. A parent that reaches its
-- final state meanwhile does so before this lock (its state is read here) or
-- after the child's edges are committed (its trigger finds the child): never
-- in between, where the child would wait for it forever.
SELECT id, state
FROM awc.jobs
WHERE id = ANY (%(ids)s::bigint[])
ORDER BY id
FOR NO KEY UPDATE
