-- Before a finished part is emptied (SPEC §24, decision 0030): carry into
-- the current part the completed parents a child not yet final still needs
-- (SPEC §20: ctx.parents() reads their results). `awc.carrying` tells the
-- parts' settle trigger that these inserts settle nothing: their children
-- were settled when the parents completed. The ids carried.
WITH carrying AS MATERIALIZED (
    SELECT set_config('awc.carrying', 'on', true) AS on_
)
INSERT INTO {current}
SELECT p.*
FROM {part} AS p, carrying
WHERE p.has_children
  AND EXISTS (SELECT 1 FROM awc.job_parents AS e JOIN ONLY awc.jobs AS c ON c.id = e.child_id
              WHERE e.parent_id = p.id AND c.state IN ('PENDING', 'RUNNING'))
RETURNING id
