-- The console's ticks page (SPEC §16, §19): the history newest first, by
-- driver, keyset-paginated by (started_at, id); died and failed ticks are
-- marked (a row never finished whose deadline has passed died).
-- Stored instants are compared, never added to: a row written by plain SQL
-- may hold any instant PostgreSQL accepts (SPEC §4.2), and `started_at + 1 hour`
-- fails past its last year.
SELECT id, driver, worker_id, started_at, finished_at, deadline_at, claimed, completed,
       retried, failed, cancelled, released, continued, rescued, fired, stop_reason, error,
       CASE WHEN isfinite(started_at) AND isfinite(finished_at)
            THEN extract(epoch FROM finished_at - started_at)::float8 END AS took_s,
       (finished_at IS NULL AND coalesce(deadline_at < now(), started_at < now() - interval '1 hour'))
           AS died
FROM awc.ticks
WHERE (%(driver)s::text IS NULL OR driver = %(driver)s)
  AND (%(before_at)s::timestamptz IS NULL OR (started_at, id) < (%(before_at)s::timestamptz, %(before_id)s))
ORDER BY started_at DESC, id DESC
LIMIT %(limit)s
