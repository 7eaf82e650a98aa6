-- The edges to their parents of the completed children a finished part is
-- about to lose (SPEC §20, §24): they go with the children, as the prune's
-- DELETE takes them from the hot table. A carried parent keeps its own.
DELETE FROM awc.job_parents AS e
USING {part} AS c
WHERE e.child_id = c.id AND c.id <> ALL (%(carried)s::bigint[])
