-- Jobs for `awc jobs list`, newest first, optionally narrowed; `waiting`, the
-- parents a PENDING child still waits for (SPEC §20; a child that ran while
-- its parent was retried keeps a count no claim reads, migration 0032).
-- Text is read cut to 1,000 characters: a table shows 60 of each, and a row
-- written by plain SQL may hold megabytes (100 rows of 1 MB errors took 243 MB to print 21 KB);
-- `awc jobs show` reads one job whole.
SELECT id, left(kind, 1000) AS kind, state, left(queue, 1000) AS queue, priority, attempts,
       max_attempts, progress, continues, run_at, updated_at,
       CASE WHEN state = 'PENDING' THEN waiting ELSE 0 END AS waiting,
       left(last_error, 1000) AS last_error
FROM awc.jobs
WHERE (%(state)s::text IS NULL OR state = %(state)s)
  AND (%(kind)s::text IS NULL OR kind = %(kind)s)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
ORDER BY id DESC
LIMIT %(limit)s
