-- Create or replace a schedule (SPEC §15). An unchanged schedule is not
-- touched at all (not even updated_at or next_fire_at); a new cron or time
-- zone, a resume, or a schedule firing had parked, starts its fires from now.
INSERT INTO awc.schedules AS s (name, cron, timezone, kind, payload, queue, priority,
                                max_attempts, missed, catchup_secs, overlap, paused,
                                next_fire_at)
VALUES (%(name)s, %(cron)s, %(timezone)s, %(kind)s, %(payload)s::jsonb, %(queue)s,
        %(priority)s, %(max_attempts)s, %(missed)s, %(catchup_secs)s, %(overlap)s,
        coalesce(%(paused)s, false), %(next_fire_at)s)
ON CONFLICT (name) DO UPDATE
SET cron = EXCLUDED.cron, timezone = EXCLUDED.timezone, kind = EXCLUDED.kind,
    payload = EXCLUDED.payload, queue = EXCLUDED.queue, priority = EXCLUDED.priority,
    max_attempts = EXCLUDED.max_attempts, missed = EXCLUDED.missed,
    catchup_secs = EXCLUDED.catchup_secs, overlap = EXCLUDED.overlap,
    paused = coalesce(%(paused)s, s.paused),
    next_fire_at = CASE
        WHEN s.cron <> EXCLUDED.cron OR s.timezone <> EXCLUDED.timezone
          OR (s.paused AND NOT coalesce(%(paused)s, s.paused))
          OR s.next_fire_at IS NULL THEN EXCLUDED.next_fire_at
        ELSE s.next_fire_at END,
    updated_at = now()
WHERE (s.cron, s.timezone, s.kind, s.payload, s.queue, s.priority, s.max_attempts, s.missed,
       s.catchup_secs, s.overlap, s.paused)
      IS DISTINCT FROM
      (EXCLUDED.cron, EXCLUDED.timezone, EXCLUDED.kind, EXCLUDED.payload, EXCLUDED.queue,
       EXCLUDED.priority, EXCLUDED.max_attempts, EXCLUDED.missed, EXCLUDED.catchup_secs,
       EXCLUDED.overlap, coalesce(%(paused)s, s.paused))
   OR s.next_fire_at IS NULL  -- parked (firing could not use it): start it again
RETURNING (xmax = 0) AS created
