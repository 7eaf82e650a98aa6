-- The console's overview (SPEC §19): jobs by state per queue, the first
-- %(groups)s queues by name, every part bounded whatever the table holds.
-- * Queues with PENDING jobs are found by skipping through jobs_ready_queue_idx
--   (one probe per queue), and each queue's PENDING jobs are counted up to
--   %(cap)s, split into ready (run_at passed) and scheduled (run_at to come,
--   not ready yet).
-- * RUNNING, FAILED, CANCELLED and COMPLETED jobs are read through the index
--   that holds each state, at most %(cap)s of each (the leases that end
--   first, the newest dead letters and cancellations, the latest finished),
--   and counted per queue: exact while a state holds fewer, a count among
--   those rows past it (the page says so). A queue whose only jobs are
--   running, failed or finished is listed too.
WITH RECURSIVE pending AS (
    (SELECT queue FROM awc.jobs WHERE state = 'PENDING' AND waiting = 0 ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM awc.jobs AS j
            WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.queue > p.queue
            ORDER BY j.queue LIMIT 1)
    FROM pending AS p
    WHERE p.queue IS NOT NULL
), others AS MATERIALIZED (
    (SELECT queue, 'RUNNING' AS state FROM awc.jobs
     WHERE state = 'RUNNING' AND locked_until IS NOT NULL
     ORDER BY locked_until LIMIT %(cap)s)
    UNION ALL
    (SELECT queue, 'FAILED' FROM awc.jobs WHERE state = 'FAILED'
     ORDER BY id DESC LIMIT %(cap)s)
    UNION ALL
    (SELECT queue, 'CANCELLED' FROM awc.jobs WHERE state = 'CANCELLED'
     ORDER BY id DESC LIMIT %(cap)s)
    UNION ALL
    (SELECT queue, 'COMPLETED' FROM awc.jobs WHERE state = 'COMPLETED'
     ORDER BY finished_at DESC LIMIT %(cap)s)
), groups AS (
    -- The first %(groups)s by name of either list: the skip stops there.
    (SELECT queue FROM pending WHERE queue IS NOT NULL LIMIT %(groups)s)
    UNION
    SELECT queue FROM others
    ORDER BY 1
    LIMIT %(groups)s
)
SELECT g.queue, p.ready, p.scheduled,
       count(o.state) FILTER (WHERE o.state = 'RUNNING') AS running,
       count(o.state) FILTER (WHERE o.state = 'FAILED') AS failed,
       count(o.state) FILTER (WHERE o.state = 'CANCELLED') AS cancelled,
       count(o.state) FILTER (WHERE o.state = 'COMPLETED') AS completed
FROM groups AS g
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE c.run_at <= now()) AS ready,
           count(*) FILTER (WHERE NOT c.run_at <= now()) AS scheduled
    FROM (SELECT j.run_at FROM awc.jobs AS j
          WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.queue = g.queue
          LIMIT %(cap)s) AS c
) AS p
LEFT JOIN others AS o ON o.queue = g.queue
GROUP BY g.queue, p.ready, p.scheduled
ORDER BY g.queue
