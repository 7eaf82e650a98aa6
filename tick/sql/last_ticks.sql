-- The last finished tick of each driver (`awc status`), with its age.
SELECT DISTINCT ON (driver) driver, finished_at,
       extract(epoch FROM now() - finished_at)::float8, stop_reason, error
FROM awc.ticks
WHERE finished_at IS NOT NULL
ORDER BY driver, finished_at DESC
