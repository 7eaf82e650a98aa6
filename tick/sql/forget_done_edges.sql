-- The edges to their parents of the completed children a finished part is
-- about to lose (SPEC §20, §24): they go with the children, as the prune's
-- DELETE takes them from the hot table. A carried parent keeps its own.
-- In two steps (tick/parts.py): the children that are no parent
-- (%(parents)s false: a fan-out's, nearly all) before the part's lock, so
-- completions never queue behind that DELETE; those that are parents
-- (true), once the carry under the lock says which of them stay.
DELETE FROM awc.job_parents AS e
USING {part} AS c
WHERE e.child_id = c.id AND c.has_children = %(parents)s::boolean
  AND c.id <> ALL (%(carried)s::bigint[])
