-- `awc limits list`, the console's Limits page and the held-back gauge
-- (SPEC §18, §19): each limit with its use now: RUNNING jobs with unexpired
-- leases, claims in the last per_secs, and ready jobs it holds back (ready
-- now, of its kind or queue, while it has no room). Counts stop at %(cap)s
-- (the console's "10,000+"; the gauge's 100,000), the RUNNING one at the
-- limit if that is more. Each count says "kind = name" or "queue = name" in
-- its own branch, so each reads its own index from that name on (a kind's
-- lanes, a queue's ready jobs), never every limit's jobs under one filter;
-- each in its index's order, so that LIMIT stops the index walk (without it
-- PostgreSQL 18 chose a sequential scan where a kind's backlog was common).
SELECT l.scope, l.name, l.max_running, l.rate, l.per_secs, l.paused, u.running,
       w.window_claims,
       CASE WHEN NOT ((l.max_running IS NOT NULL AND u.running >= l.max_running)
                      OR (l.rate IS NOT NULL AND w.window_claims >= l.rate))
            THEN 0
            WHEN l.scope = 'kind'
            THEN (SELECT count(*) FROM (
                      SELECT 1 FROM ONLY awc.jobs AS j
                      WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.kind = l.name AND j.run_at <= now()
                      ORDER BY j.queue, j.priority, j.run_at, j.id  -- jobs_ready_lane_idx's
                      LIMIT %(cap)s) AS ready)
            ELSE (SELECT count(*) FROM (
                      SELECT 1 FROM ONLY awc.jobs AS j
                      WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.queue = l.name AND j.run_at <= now()
                      ORDER BY j.queue, -j.priority::int, j.run_at, j.id  -- jobs_ready_queue_idx's
                      LIMIT %(cap)s) AS ready)
            END AS held_back
FROM awc.limits AS l,
LATERAL (SELECT count(*) AS running FROM (
             SELECT 1 FROM ONLY awc.jobs AS r
             WHERE r.locked_until > now() AND r.state = 'RUNNING'
               AND CASE l.scope WHEN 'kind' THEN r.kind ELSE r.queue END = l.name
             LIMIT greatest(%(cap)s, l.max_running)) AS counted) AS u,
LATERAL (SELECT count(*) AS window_claims FROM awc.limit_claims AS c
         WHERE l.rate IS NOT NULL AND c.scope = l.scope AND c.name = l.name
           AND c.at > clock_timestamp() - make_interval(secs => l.per_secs)) AS w
ORDER BY l.scope, l.name
