-- The console's overview: the latest tick of each driver, finished or not,
-- one index probe each (ticks_driver_idx), with whether it died (a row never
-- finished whose deadline has passed, as `awc ticks` says).
-- Stored instants are compared, never added to: a row written by plain SQL
-- may hold any instant PostgreSQL accepts (SPEC §4.2), and `started_at + 1 hour`
-- fails past its last year.
SELECT d.driver, t.id, t.started_at, t.finished_at, t.stop_reason, t.error,
       (t.finished_at IS NULL
        AND coalesce(t.deadline_at < now(), t.started_at < now() - interval '1 hour')) AS died
FROM unnest(ARRAY['tick', 'loop', 'lambda', 'maintenance']) AS d (driver)
CROSS JOIN LATERAL (
    SELECT * FROM awc.ticks AS x
    WHERE x.driver = d.driver
    ORDER BY x.started_at DESC, x.id DESC
    LIMIT 1
) AS t
ORDER BY d.driver
