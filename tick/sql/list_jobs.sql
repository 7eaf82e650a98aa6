-- Jobs for `awc jobs list`, newest first, optionally narrowed; `waiting`, the
-- parents a child still waits for (SPEC §20).
SELECT id, kind, state, queue, priority, attempts, max_attempts, progress, continues, run_at,
       updated_at, waiting, last_error
FROM awc.jobs
WHERE (%(state)s::text IS NULL OR state = %(state)s)
  AND (%(kind)s::text IS NULL OR kind = %(kind)s)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
ORDER BY id DESC
LIMIT %(limit)s
