-- The console's ticks page (SPEC §16, §19): the history newest first, by
-- driver, keyset-paginated by (started_at, id); died and failed ticks are
-- marked (a row never finished whose deadline has passed died).
SELECT id, driver, worker_id, started_at, finished_at, deadline_at, claimed, completed,
       retried, failed, cancelled, continued, rescued, fired, stop_reason, error,
       (finished_at IS NULL AND coalesce(deadline_at, started_at + interval '1 hour') < now())
           AS died
FROM awc.ticks
WHERE (%(driver)s::text IS NULL OR driver = %(driver)s)
  AND (%(before_at)s::timestamptz IS NULL OR (started_at, id) < (%(before_at)s, %(before_id)s))
ORDER BY started_at DESC, id DESC
LIMIT %(limit)s
