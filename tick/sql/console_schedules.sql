-- The console's schedules page (SPEC §19, §22): a page of schedules by name
-- after %(after)s, each with its last *scheduled* fire (a manual trigger
-- never hides a missed 03:00) and that fire's job state: one walk back along
-- the ledger's primary key per schedule, past its manual fires.
SELECT s.name, s.cron, s.timezone, s.kind, s.queue, s.missed, s.overlap, s.paused,
       s.next_fire_at, s.last_fire_at,
       f.status AS last_status, f.job_id AS last_job_id, j.state AS last_job_state
FROM awc.schedules AS s
LEFT JOIN LATERAL (
    SELECT status, job_id FROM awc.schedule_fires AS x
    WHERE x.schedule = s.name AND x.status <> 'manual'
    ORDER BY x.fire_at DESC
    LIMIT 1
) AS f ON true
LEFT JOIN awc.jobs AS j ON j.id = f.job_id
WHERE s.name > %(after)s
ORDER BY s.name
LIMIT %(limit)s
