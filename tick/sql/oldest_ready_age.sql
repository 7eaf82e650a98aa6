-- Age in seconds of the oldest job ready to run (PENDING, run_at passed).
-- Jobs with an infinite run_at have no age to measure (and would fail the subtraction).
SELECT extract(epoch FROM now() - min(run_at) FILTER (WHERE isfinite(run_at)))::float8
FROM ONLY awc.jobs
WHERE state = 'PENDING' AND waiting = 0
  AND run_at <= now()
