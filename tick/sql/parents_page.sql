-- One page of a job's parents, in id order after %(after)s (SPEC §20:
-- ctx.parents()), by job_parents' primary key. A parent deleted since (its
-- retention passed while the child was final, and a retry revived the
-- child; or an operator discarded it then) is listed as DELETED, with no
-- kind or result: left out, a callback read 99 of its 100 parents as if
-- they were all.
SELECT e.parent_id, p.kind, coalesce(p.state, 'DELETED'), p.result::text
FROM awc.job_parents AS e
LEFT JOIN awc.jobs AS p ON p.id = e.parent_id
WHERE e.child_id = %(child)s AND e.parent_id > %(after)s
ORDER BY e.parent_id
LIMIT %(page)s
