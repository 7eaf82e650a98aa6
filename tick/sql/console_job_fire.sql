-- The console's job page: the schedule fire that made the job, if any
-- (schedule_fires_job_idx).
SELECT schedule, fire_at, status, recorded_at
FROM awc.schedule_fires
WHERE job_id = %(id)s
LIMIT 1
