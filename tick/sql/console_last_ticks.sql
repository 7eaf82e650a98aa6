-- The console's overview: the latest tick of each driver, finished or not,
-- one index probe each (ticks_driver_idx), with whether it died (a row never
-- finished whose deadline has passed, as `awc ticks` says).
SELECT d.driver, t.id, t.started_at, t.finished_at, t.stop_reason, t.error,
       (t.finished_at IS NULL
        AND coalesce(t.deadline_at, t.started_at + interval '1 hour') < now()) AS died
FROM unnest(ARRAY['tick', 'loop', 'lambda', 'maintenance']) AS d (driver)
CROSS JOIN LATERAL (
    SELECT * FROM awc.ticks AS x
    WHERE x.driver = d.driver
    ORDER BY x.started_at DESC, x.id DESC
    LIMIT 1
) AS t
ORDER BY d.driver
