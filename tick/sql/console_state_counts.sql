-- The console's overview (SPEC §19): jobs by state, each count capped at
-- %(cap)s so no page counts a large table. Each state is a literal, so the
-- planner can use the partial index that holds it: PENDING jobs_ready_idx and jobs_waiting_idx,
-- RUNNING the lease index, COMPLETED jobs_finished_idx, FAILED and
-- CANCELLED jobs_dead_idx. A state with more rows than the cap shows "cap+".
SELECT 'PENDING', (SELECT count(*) FROM (
           SELECT 1 FROM awc.jobs WHERE state = 'PENDING' AND waiting = 0
           UNION ALL  -- and the children waiting for parents (SPEC §20)
           SELECT 1 FROM awc.jobs WHERE state = 'PENDING' AND waiting > 0
           LIMIT %(cap)s) AS capped)
UNION ALL
SELECT 'RUNNING', (SELECT count(*) FROM (
           SELECT 1 FROM awc.jobs WHERE state = 'RUNNING' AND locked_until IS NOT NULL
           LIMIT %(cap)s) AS capped)
UNION ALL
SELECT 'COMPLETED', (SELECT count(*) FROM (
           SELECT 1 FROM awc.jobs WHERE state = 'COMPLETED' LIMIT %(cap)s) AS capped)
UNION ALL
SELECT 'FAILED', (SELECT count(*) FROM (
           SELECT 1 FROM awc.jobs WHERE state = 'FAILED' LIMIT %(cap)s) AS capped)
UNION ALL
SELECT 'CANCELLED', (SELECT count(*) FROM (
           SELECT 1 FROM awc.jobs WHERE state = 'CANCELLED' LIMIT %(cap)s) AS capped)
