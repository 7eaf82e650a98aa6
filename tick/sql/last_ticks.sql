-- Per driver (`awc status`, SPEC §16): the last finished tick, and the last
-- one that succeeded (finished with no error), each with its age. Alert on
-- the success age: a tick that fails every minute keeps the first one fresh.
SELECT d.driver, last.finished_at, extract(epoch FROM now() - last.finished_at)::float8,
       last.stop_reason, last.error,
       ok.finished_at, extract(epoch FROM now() - ok.finished_at)::float8
FROM (SELECT DISTINCT driver FROM awc.ticks WHERE finished_at IS NOT NULL) AS d
CROSS JOIN LATERAL (
    SELECT t.finished_at, t.stop_reason, t.error FROM awc.ticks AS t
    WHERE t.driver = d.driver AND t.finished_at IS NOT NULL
    ORDER BY t.finished_at DESC LIMIT 1) AS last
LEFT JOIN LATERAL (
    SELECT t.finished_at FROM awc.ticks AS t
    WHERE t.driver = d.driver AND t.finished_at IS NOT NULL AND t.error IS NULL
    ORDER BY t.finished_at DESC LIMIT 1) AS ok ON true
ORDER BY d.driver
