-- The console's job list filtered by id: that job, if it matches the rest
-- of the filter.
SELECT id, kind, state, queue, priority, attempts, max_attempts, progress, continues,
       run_at, updated_at, left(last_error, 300) AS last_error
FROM awc.jobs
WHERE id = %(id)s
  AND (%(state)s::text IS NULL OR state = %(state)s)
  AND (%(kind)s::text IS NULL OR kind = %(kind)s)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
