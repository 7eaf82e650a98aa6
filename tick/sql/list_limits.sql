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
--
-- A per-key limit (SPEC §23: scope `key`, one key or '*'; `kind_key`, each
-- key of a kind) counts the RUNNING jobs of every key it limits, and lists
-- its %(busiest)s busiest keys with theirs (jobs_running_key_idx: RUNNING
-- jobs only, never a key's backlog); it is saturated when its busiest key
-- is. Only `key:NAME` counts what it holds back (that key's ready jobs).
-- `key:*` covers the keys without a `key:NAME` of their own (which replaces it).
WITH RECURSIVE ps AS (
    -- The priorities with ready jobs, one probe from each to the next: read
    -- once for every saturated `key:NAME` (below), and only if one is.
    (SELECT -j.priority::int AS p FROM ONLY awc.jobs AS j
     WHERE j.state = 'PENDING' AND j.waiting = 0
     ORDER BY -j.priority::int LIMIT 1)
    UNION ALL
    SELECT (SELECT -j.priority::int FROM ONLY awc.jobs AS j
            WHERE j.state = 'PENDING' AND j.waiting = 0 AND -j.priority::int > ps.p
            ORDER BY -j.priority::int LIMIT 1)
    FROM ps WHERE ps.p IS NOT NULL
)
SELECT l.scope, l.name, l.max_running, l.rate, l.per_secs, l.paused, u.running,
       w.window_claims,
       CASE WHEN NOT ((l.max_running IS NOT NULL
                       AND coalesce(k.top, u.running) >= l.max_running)
                      OR (l.rate IS NOT NULL AND w.window_claims >= l.rate))
            THEN 0
            WHEN l.scope = 'kind'
            THEN (SELECT count(*) FROM (
                      SELECT 1 FROM ONLY awc.jobs AS j
                      WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.kind = l.name AND j.run_at <= now()
                      -- jobs_ready_lane_idx's order
                      ORDER BY j.queue, j.priority, coalesce(j.key, ''), j.run_at, j.id
                      LIMIT %(cap)s) AS ready)
            WHEN l.scope = 'queue'
            THEN (SELECT count(*) FROM (
                      SELECT 1 FROM ONLY awc.jobs AS j
                      WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.queue = l.name AND j.run_at <= now()
                      ORDER BY j.queue, -j.priority::int, j.run_at, j.id  -- jobs_ready_queue_idx's
                      LIMIT %(cap)s) AS ready)
            WHEN l.scope = 'key' AND l.name <> '*'
            -- The key's range of jobs_ready_key_idx at each priority with
            -- ready jobs (a probe from one priority to the next): the
            -- index leads with the priority, and a filter on the key alone
            -- read every ready job, a limit at a time.
            THEN (SELECT least(coalesce(sum(c.n), 0), %(cap)s)::bigint
                  FROM ps, LATERAL (
                      SELECT count(*) AS n FROM (
                          SELECT 1 FROM ONLY awc.jobs AS j
                          WHERE j.state = 'PENDING' AND j.waiting = 0 AND -j.priority::int = ps.p
                            AND coalesce(j.key, '') = l.name AND j.run_at <= now()
                          ORDER BY -j.priority::int, coalesce(j.key, ''), j.run_at, j.id
                          LIMIT %(cap)s) AS ready) AS c
                  WHERE ps.p IS NOT NULL)
            ELSE 0
            END AS held_back,
       k.busiest
FROM awc.limits AS l,
LATERAL (SELECT count(*) AS running FROM (
             SELECT 1 FROM ONLY awc.jobs AS r
             WHERE r.locked_until > now() AND r.state = 'RUNNING'
               AND CASE l.scope WHEN 'kind' THEN r.kind = l.name
                                WHEN 'queue' THEN r.queue = l.name
                                WHEN 'key' THEN r.key IS NOT NULL
                                                AND (r.key = l.name OR l.name = '*'
                                                     AND NOT EXISTS (SELECT 1 FROM awc.limits AS own
                                                                     WHERE own.scope = 'key'
                                                                       AND own.name = r.key))
                                ELSE r.key IS NOT NULL AND r.kind = l.name END
             LIMIT greatest(%(cap)s, l.max_running)) AS counted) AS u,
LATERAL (SELECT count(*) AS window_claims FROM awc.limit_claims AS c
         WHERE l.rate IS NOT NULL AND c.scope = l.scope AND c.name = l.name
           AND c.at > clock_timestamp() - make_interval(secs => l.per_secs)) AS w,
LATERAL (SELECT max(b.n) AS top,
                json_agg(json_build_object('key', b.key, 'running', b.n)
                         ORDER BY b.n DESC, b.key) AS busiest
         FROM (SELECT r.key, count(*) AS n
               FROM ONLY awc.jobs AS r
               WHERE l.scope IN ('key', 'kind_key')
                 AND r.state = 'RUNNING' AND r.key IS NOT NULL AND r.locked_until > now()
                 AND (l.scope = 'kind_key' OR r.key = l.name
                      OR l.name = '*' AND NOT EXISTS (SELECT 1 FROM awc.limits AS own
                                                      WHERE own.scope = 'key' AND own.name = r.key))
                 AND (l.scope = 'key' OR r.kind = l.name)
               GROUP BY r.key
               ORDER BY n DESC, r.key
               LIMIT %(busiest)s) AS b) AS k
ORDER BY l.scope, l.name
