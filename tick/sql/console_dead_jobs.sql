-- The console's job list filtered to FAILED or CANCELLED: these are few, and
-- jobs_dead_idx holds them in id order, so the list reads only the rows it
-- shows (no window), however large the table.
SELECT id, kind, state, queue, priority, attempts, max_attempts, progress, continues,
       run_at, updated_at, left(last_error, 300) AS last_error, NULL::bigint AS scanned_to, NULL::bigint AS scanned
FROM awc.jobs
WHERE state IN ('FAILED', 'CANCELLED')  -- provable to jobs_dead_idx in a generic plan
  AND state = %(state)s
  AND id < %(before)s
  AND (%(kind)s::text IS NULL OR kind = %(kind)s)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
ORDER BY state, id DESC
LIMIT %(limit)s
