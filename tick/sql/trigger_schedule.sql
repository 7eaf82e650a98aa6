-- Enqueue one job of a schedule now, recorded `manual` in its ledger (SPEC §15).
WITH s AS (
    SELECT kind, payload, queue, priority, max_attempts FROM awc.schedules WHERE name = %(name)s
), job AS (
    INSERT INTO awc.jobs (kind, payload, queue, priority, max_attempts)
    SELECT kind, payload, queue, priority, max_attempts FROM s
    RETURNING id
), fire AS (
    INSERT INTO awc.schedule_fires (schedule, fire_at, status, job_id)
    SELECT %(name)s, now(), 'manual', id FROM job
    RETURNING job_id
)
SELECT job_id FROM fire
