-- The console's overview: the newest dead letters (FAILED jobs), through
-- jobs_dead_idx.
SELECT id, kind, queue, attempts, max_attempts, updated_at, left(last_error, 300) AS last_error
FROM awc.jobs
WHERE state = 'FAILED'
ORDER BY id DESC
LIMIT %(limit)s
