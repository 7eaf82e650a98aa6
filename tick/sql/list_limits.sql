-- `awc limits list` (SPEC §18): each limit with its use now: RUNNING jobs
-- with unexpired leases, claims in the last per_secs, and ready jobs it
-- holds back (ready now, of its kind or queue, while it has no room; a
-- bounded count, as the metrics sample it).
SELECT l.scope, l.name, l.max_running, l.rate, l.per_secs, u.running, w.window_claims,
       CASE WHEN (l.max_running IS NOT NULL AND u.running >= l.max_running)
                 OR (l.rate IS NOT NULL AND w.window_claims >= l.rate)
            THEN (SELECT count(*) FROM (
                      SELECT 1 FROM awc.jobs AS j
                      WHERE j.state = 'PENDING' AND j.run_at <= now()
                        AND ((l.scope = 'kind' AND j.kind = l.name)
                             OR (l.scope = 'queue' AND j.queue = l.name))
                      LIMIT 100000) AS ready)
            ELSE 0 END AS held_back
FROM awc.limits AS l,
LATERAL (SELECT count(*) AS running FROM awc.jobs AS r
         WHERE r.locked_until > now() AND r.state = 'RUNNING'
           AND CASE l.scope WHEN 'kind' THEN r.kind ELSE r.queue END = l.name) AS u,
LATERAL (SELECT count(*) AS window_claims FROM awc.limit_claims AS c
         WHERE l.rate IS NOT NULL AND c.scope = l.scope AND c.name = l.name
           AND c.at > clock_timestamp() - make_interval(secs => l.per_secs)) AS w
ORDER BY l.scope, l.name
