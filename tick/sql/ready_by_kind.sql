-- Queue gauges (awc_queue_ready_jobs, awc_queue_oldest_ready_age_seconds) by
-- kind. Reads ready jobs through jobs_ready_idx, at most 100,000 of them, so a
-- scrape never scans the table: past that the counts saturate.
-- Jobs with an infinite run_at count as ready but have no age to measure.
SELECT kind, count(*),
       extract(epoch FROM now() - min(run_at) FILTER (WHERE isfinite(run_at)))::float8
FROM (
    SELECT kind, run_at
    FROM ONLY awc.jobs
    WHERE state = 'PENDING' AND waiting = 0 AND run_at <= now()
    ORDER BY -priority::int, run_at, id
    LIMIT 100000
) AS ready
GROUP BY kind
