-- The console's schedule page: one schedule's declaration and state.
SELECT name, cron, timezone, kind, left(payload::text, 10000) AS payload, queue, priority,
       max_attempts, missed, catchup_secs, overlap, paused, next_fire_at, last_fire_at,
       created_at, updated_at
FROM awc.schedules
WHERE name = %(name)s
