-- Record a schedule's due fires in its ledger and insert the job of each
-- enqueued one, in the transaction that holds the schedule (SPEC §15). Each
-- fire time has one ledger row (primary key); a job exists only for an
-- `enqueued` row, with run_at = fire_at, carrying the trace context of the
-- run that fired it (SPEC §21; null while tracing is off); then next_fire_at
-- advances.
WITH recorded AS (
    INSERT INTO awc.schedule_fires (schedule, fire_at, status, job_id)
    SELECT %(name)s, f.fire_at, f.status,
           CASE WHEN f.status = 'enqueued' THEN nextval('awc.jobs_id_seq') END
    FROM unnest(%(fire_ats)s::timestamptz[], %(statuses)s::text[]) AS f(fire_at, status)
    ON CONFLICT (schedule, fire_at) DO NOTHING
    RETURNING fire_at, status, job_id
), jobs AS (
    INSERT INTO awc.jobs (id, kind, payload, queue, priority, max_attempts, run_at, trace_context)
    SELECT r.job_id, s.kind, s.payload, s.queue, s.priority, s.max_attempts, r.fire_at,
           %(trace)s::jsonb
    FROM recorded AS r, awc.schedules AS s
    WHERE s.name = %(name)s AND r.job_id IS NOT NULL
    RETURNING id
), advanced AS (
    UPDATE awc.schedules
    SET next_fire_at = %(next_fire_at)s,
        last_fire_at = coalesce((SELECT max(fire_at) FROM recorded
                                 WHERE status = 'enqueued'), last_fire_at),
        updated_at = now()
    WHERE name = %(name)s
)
SELECT r.fire_at, r.status, r.job_id FROM recorded AS r ORDER BY r.fire_at
