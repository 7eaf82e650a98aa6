-- Per driver (`awc status`, SPEC §16): the last finished tick, and the last
-- one that succeeded (finished with no error), each with its age. Alert on
-- the success age: a tick that fails every minute keeps the first one fresh.
-- A row written by plain SQL may hold any instant PostgreSQL accepts (SPEC
-- §4.2): one finished in the future has not finished yet, so it never hides
-- the real last tick, and an infinite one has no age (subtracting it fails).
-- Its error is read cut to 1,000 characters (a line of `awc status`).
SELECT d.driver, last.finished_at,
       extract(epoch FROM now() - CASE WHEN isfinite(last.finished_at)
                                       THEN last.finished_at END)::float8,
       last.stop_reason, left(last.error, 1000), ok.finished_at,
       extract(epoch FROM now() - CASE WHEN isfinite(ok.finished_at)
                                       THEN ok.finished_at END)::float8
FROM (SELECT DISTINCT driver FROM awc.ticks WHERE finished_at <= now()) AS d
CROSS JOIN LATERAL (
    SELECT t.finished_at, t.stop_reason, t.error FROM awc.ticks AS t
    WHERE t.driver = d.driver AND t.finished_at <= now()
    ORDER BY t.finished_at DESC LIMIT 1) AS last
LEFT JOIN LATERAL (
    SELECT t.finished_at FROM awc.ticks AS t
    WHERE t.driver = d.driver AND t.finished_at <= now() AND t.error IS NULL
    ORDER BY t.finished_at DESC LIMIT 1) AS ok ON true
ORDER BY d.driver
