-- Age in seconds of the oldest job ready to run (PENDING, run_at passed).
SELECT extract(epoch FROM now() - min(run_at))::float8
FROM awc.jobs
WHERE state = 'PENDING'
  AND run_at <= now()
