-- The jobs a bulk action would touch, the console's (SPEC §19) and
-- `awc retry|cancel|jobs discard` with a filter (SPEC §22): those matching
-- the filter in the states the action applies to (%(states)s: FAILED and
-- CANCELLED for retry, PENDING and RUNNING for cancel, FAILED, CANCELLED and
-- COMPLETED for discard), at most %(cap)s of them. %(older_secs)s, if not
-- NULL, keeps jobs finished longer ago than that (final states) or created
-- longer ago (PENDING, RUNNING). Each state is its own branch with the state
-- as a literal, so each reads its partial index (jobs_dead_idx,
-- jobs_finished_idx, jobs_ready_lane_idx or jobs_ready_queue_idx or
-- jobs_ready_idx, jobs_waiting_idx, the lease index) and the preview's count and the action
-- read at most %(cap)s rows per state.
(SELECT id FROM awc.jobs
 WHERE 'FAILED' = ANY(%(states)s::text[]) AND state = 'FAILED'
   AND (%(kind)s::text IS NULL OR kind = %(kind)s)
   AND (%(queue)s::text IS NULL OR queue = %(queue)s)
   AND (%(older_secs)s::float8 IS NULL
        OR finished_at < now() - make_interval(secs => %(older_secs)s::float8))
 LIMIT %(cap)s)
UNION ALL
(SELECT id FROM awc.jobs
 WHERE 'CANCELLED' = ANY(%(states)s::text[]) AND state = 'CANCELLED'
   AND (%(kind)s::text IS NULL OR kind = %(kind)s)
   AND (%(queue)s::text IS NULL OR queue = %(queue)s)
   AND (%(older_secs)s::float8 IS NULL
        OR finished_at < now() - make_interval(secs => %(older_secs)s::float8))
 LIMIT %(cap)s)
UNION ALL
(SELECT id FROM awc.jobs
 WHERE 'COMPLETED' = ANY(%(states)s::text[]) AND state = 'COMPLETED'
   AND (%(kind)s::text IS NULL OR kind = %(kind)s)
   AND (%(queue)s::text IS NULL OR queue = %(queue)s)
   AND (%(older_secs)s::float8 IS NULL
        OR finished_at < now() - make_interval(secs => %(older_secs)s::float8))
 LIMIT %(cap)s)
UNION ALL
(SELECT id FROM awc.jobs
 WHERE 'PENDING' = ANY(%(states)s::text[]) AND state = 'PENDING' AND waiting = 0
   AND (%(kind)s::text IS NULL OR kind = %(kind)s)
   AND (%(queue)s::text IS NULL OR queue = %(queue)s)
   AND (%(older_secs)s::float8 IS NULL
        OR created_at < now() - make_interval(secs => %(older_secs)s::float8))
 LIMIT %(cap)s)
UNION ALL
(SELECT id FROM awc.jobs  -- PENDING children waiting for parents (SPEC §20)
 WHERE 'PENDING' = ANY(%(states)s::text[]) AND state = 'PENDING' AND waiting > 0
   AND (%(kind)s::text IS NULL OR kind = %(kind)s)
   AND (%(queue)s::text IS NULL OR queue = %(queue)s)
   AND (%(older_secs)s::float8 IS NULL
        OR created_at < now() - make_interval(secs => %(older_secs)s::float8))
 LIMIT %(cap)s)
UNION ALL
(SELECT id FROM awc.jobs
 WHERE 'RUNNING' = ANY(%(states)s::text[]) AND state = 'RUNNING'
   AND locked_until IS NOT NULL
   AND (%(kind)s::text IS NULL OR kind = %(kind)s)
   AND (%(queue)s::text IS NULL OR queue = %(queue)s)
   AND (%(older_secs)s::float8 IS NULL
        OR created_at < now() - make_interval(secs => %(older_secs)s::float8))
 LIMIT %(cap)s)
LIMIT %(cap)s
