-- The last finished tick of each driver (`awc status`), with its age. A row
-- written by plain SQL may hold any instant PostgreSQL accepts (SPEC §4.2):
-- one finished in the future has not finished yet, so it never hides the
-- real last tick, and an infinite one has no age (subtracting it fails).
SELECT DISTINCT ON (driver) driver, finished_at,
       extract(epoch FROM now() - CASE WHEN isfinite(finished_at) THEN finished_at END)::float8,
       stop_reason, error
FROM awc.ticks
WHERE finished_at <= now()
ORDER BY driver, finished_at DESC
