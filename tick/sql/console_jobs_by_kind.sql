-- The console's overview (SPEC §19): jobs by state per kind, the first
-- %(groups)s kinds by name, every part bounded whatever the table holds.
-- * Kinds with PENDING jobs are found by skipping through jobs_ready_lane_idx
--   (one probe per kind), and each kind's PENDING jobs are counted up to
--   %(cap)s, split into ready (run_at passed) and scheduled (run_at to come,
--   not ready yet).
-- * RUNNING, FAILED, CANCELLED and COMPLETED jobs are read through the index
--   that holds each state, at most %(cap)s of each (the leases that end
--   first, the newest dead letters and cancellations, the latest finished),
--   and counted per kind: exact while a state holds fewer, a count among
--   those rows past it (the page says so). A kind whose only jobs are
--   running, failed or finished is listed too.
WITH RECURSIVE pending AS (
    (SELECT kind FROM awc.jobs WHERE state = 'PENDING' AND waiting = 0 ORDER BY kind LIMIT 1)
    UNION ALL
    SELECT (SELECT j.kind FROM awc.jobs AS j
            WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.kind > p.kind
            ORDER BY j.kind LIMIT 1)
    FROM pending AS p
    WHERE p.kind IS NOT NULL
), others AS MATERIALIZED (
    (SELECT kind, 'RUNNING' AS state FROM awc.jobs
     WHERE state = 'RUNNING' AND locked_until IS NOT NULL
     ORDER BY locked_until LIMIT %(cap)s)
    UNION ALL
    (SELECT kind, 'FAILED' FROM awc.jobs WHERE state = 'FAILED'
     ORDER BY id DESC LIMIT %(cap)s)
    UNION ALL
    (SELECT kind, 'CANCELLED' FROM awc.jobs WHERE state = 'CANCELLED'
     ORDER BY id DESC LIMIT %(cap)s)
    UNION ALL
    (SELECT kind, 'COMPLETED' FROM awc.jobs WHERE state = 'COMPLETED'
     ORDER BY finished_at DESC LIMIT %(cap)s)
), groups AS (
    -- The first %(groups)s by name of either list: the skip stops there.
    (SELECT kind FROM pending WHERE kind IS NOT NULL LIMIT %(groups)s)
    UNION
    SELECT kind FROM others
    ORDER BY 1
    LIMIT %(groups)s
)
SELECT g.kind, p.ready, p.scheduled,
       count(o.state) FILTER (WHERE o.state = 'RUNNING') AS running,
       count(o.state) FILTER (WHERE o.state = 'FAILED') AS failed,
       count(o.state) FILTER (WHERE o.state = 'CANCELLED') AS cancelled,
       count(o.state) FILTER (WHERE o.state = 'COMPLETED') AS completed
FROM groups AS g
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE c.run_at <= now()) AS ready,
           count(*) FILTER (WHERE NOT c.run_at <= now()) AS scheduled
    FROM (SELECT j.run_at FROM awc.jobs AS j
          WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.kind = g.kind
          LIMIT %(cap)s) AS c
) AS p
LEFT JOIN others AS o ON o.kind = g.kind
GROUP BY g.kind, p.ready, p.scheduled
ORDER BY g.kind
