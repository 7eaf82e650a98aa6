-- One page of a job's parents, in id order after %(after)s (SPEC §20:
-- ctx.parents()), by job_parents' primary key. A parent pruned since is
-- not listed.
SELECT p.id, p.kind, p.state, p.result::text
FROM awc.job_parents AS e
JOIN awc.jobs AS p ON p.id = e.parent_id
WHERE e.child_id = %(child)s AND e.parent_id > %(after)s
ORDER BY e.parent_id
LIMIT %(page)s
