-- The history, newest first (`awc ticks`): a row never finished whose
-- deadline has passed died (killed, or its host lost).
-- Stored instants are compared, never added to: a row written by plain SQL
-- may hold any instant PostgreSQL accepts (SPEC §4.2), and `started_at + 1 hour`
-- fails past its last year.
SELECT id, driver, left(worker_id, 1000) AS worker_id,
       left(correlation_id, 1000) AS correlation_id, started_at, finished_at, deadline_at,
       claimed, completed, retried, failed, cancelled, released, discarded, continued,
       rescued, pruned, fired, stop_reason,
       left(error, 1000) AS error,  -- read cut, as awc jobs list's (list_jobs.sql)
       (finished_at IS NULL AND coalesce(deadline_at < now(), started_at < now() - interval '1 hour'))
           AS died
FROM awc.ticks
WHERE (%(driver)s::text IS NULL OR driver = %(driver)s)
  AND (%(since)s::timestamptz IS NULL OR started_at >= %(since)s)
  AND (NOT %(failed)s OR error IS NOT NULL
       OR (finished_at IS NULL AND coalesce(deadline_at < now(), started_at < now() - interval '1 hour')))
ORDER BY started_at DESC, id DESC
LIMIT %(limit)s
