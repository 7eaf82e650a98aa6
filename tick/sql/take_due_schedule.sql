-- One due schedule for this transaction (SPEC §15), locked so concurrent
-- ticks fire different schedules and never the same fire twice; with the
-- database's clock, so every tick agrees on what is due.
SELECT name, cron, timezone, missed, catchup_secs, overlap, next_fire_at, now(),
       (SELECT j.state FROM awc.schedule_fires AS f JOIN awc.jobs AS j ON j.id = f.job_id
        WHERE f.schedule = s.name AND f.job_id IS NOT NULL
        ORDER BY f.fire_at DESC LIMIT 1)
FROM awc.schedules AS s
WHERE NOT paused AND next_fire_at <= now()
  AND name <> ALL (%(capped)s::text[])  -- enqueued its 100 in this call already
ORDER BY next_fire_at
LIMIT 1
FOR UPDATE SKIP LOCKED
