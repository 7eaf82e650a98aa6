-- The console's overview: ready jobs per queue, as console_ready_by_kind
-- does per kind, skipping through jobs_ready_queue_idx.
WITH RECURSIVE queues AS (
    (SELECT queue FROM awc.jobs WHERE state = 'PENDING' ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM awc.jobs AS j
            WHERE j.state = 'PENDING' AND j.queue > q.queue
            ORDER BY j.queue LIMIT 1)
    FROM queues AS q
    WHERE q.queue IS NOT NULL
)
SELECT q.queue,
       (SELECT count(*) FROM (SELECT 1 FROM awc.jobs AS j
                              WHERE j.state = 'PENDING' AND j.queue = q.queue
                              LIMIT %(cap)s) AS capped) AS pending,
       (SELECT count(*) FROM (SELECT 1 FROM awc.jobs AS j
                              WHERE j.state = 'RUNNING' AND j.locked_until IS NOT NULL
                                AND j.queue = q.queue
                              LIMIT %(cap)s) AS capped) AS running
FROM (SELECT queue FROM queues WHERE queue IS NOT NULL LIMIT %(queues)s) AS q
