-- A schedule's ledger, newest fire first (`awc schedules history`).
SELECT schedule, fire_at, status, job_id, recorded_at
FROM awc.schedule_fires
WHERE schedule = %(name)s
ORDER BY fire_at DESC
LIMIT %(limit)s
