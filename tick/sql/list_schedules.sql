-- Every schedule with the state of its last fire's job (`awc schedules list`).
SELECT s.name, s.cron, s.timezone, s.kind, s.payload, s.queue, s.priority, s.max_attempts,
       s.missed, s.catchup_secs, s.overlap, s.paused, s.next_fire_at, s.last_fire_at,
       s.created_at, s.updated_at,
       (SELECT j.state FROM awc.schedule_fires AS f JOIN awc.jobs AS j ON j.id = f.job_id
        WHERE f.schedule = s.name AND f.job_id IS NOT NULL
        ORDER BY f.fire_at DESC LIMIT 1) AS last_job_state
FROM awc.schedules AS s
ORDER BY s.name
LIMIT %(limit)s
