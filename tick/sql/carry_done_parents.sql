-- Before a finished part is emptied (SPEC §24, decision 0030): carry into
-- the current part the completed parents a child not yet final still needs
-- (SPEC §20: ctx.parents() reads their results). An insert into a part
-- settles nothing (the completion statement settles children itself since
-- migration 0022): their children were settled when the parents completed.
-- The ids carried.
INSERT INTO {current}
SELECT p.*
FROM {part} AS p
WHERE p.has_children
  AND EXISTS (SELECT 1 FROM awc.job_parents AS e JOIN ONLY awc.jobs AS c ON c.id = e.child_id
              WHERE e.parent_id = p.id AND c.state IN ('PENDING', 'RUNNING'))
RETURNING id
