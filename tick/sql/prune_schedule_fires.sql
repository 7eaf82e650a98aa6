-- Prune the schedule ledger (SPEC §15, AWC_SCHEDULE_HISTORY_SECS): one bounded batch.
-- A row whose job is still PENDING or RUNNING stays, whatever its age: it is
-- how a fire with overlap = skip finds the previous job still live
-- (take_due_schedule.sql); pruned, the next fire enqueued a second job.
WITH old AS (
    SELECT f.schedule, f.fire_at FROM awc.schedule_fires AS f
    WHERE f.recorded_at < now() - make_interval(secs => %(after_secs)s::float8)
      AND NOT EXISTS (SELECT 1 FROM ONLY awc.jobs AS j
                      WHERE j.id = f.job_id AND j.state IN ('PENDING', 'RUNNING'))
    ORDER BY f.recorded_at
    LIMIT %(limit)s
)
DELETE FROM awc.schedule_fires AS f
USING old
WHERE f.schedule = old.schedule AND f.fire_at = old.fire_at
