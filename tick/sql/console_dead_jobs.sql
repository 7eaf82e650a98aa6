-- The console's job list filtered to FAILED or CANCELLED: these are few, and
-- jobs_dead_idx holds them in id order, so the list reads only the rows it
-- shows (no window), however large the table: below %(before)s, or, for the
-- Newer link (%(newer)s), just above %(after)s (the caller shows them newest
-- first). A payload search (`payload @> %(payload)s`) reads the payload of
-- the rows the index gives.
(SELECT id, kind, state, queue, priority, attempts, max_attempts, progress, continues,
        run_at, updated_at, left(last_error, 300) AS last_error, NULL::bigint AS scanned_to,
        NULL::bigint AS scanned, NULL::bigint AS matches
 FROM awc.jobs
 WHERE NOT %(newer)s
   AND state IN ('FAILED', 'CANCELLED')  -- provable to jobs_dead_idx in a generic plan
   AND state = %(state)s
   AND id < %(before)s
   AND (%(kind)s::text IS NULL OR kind = %(kind)s)
   AND (%(queue)s::text IS NULL OR queue = %(queue)s)
   AND (%(payload)s::jsonb IS NULL OR payload @> %(payload)s::jsonb)
 ORDER BY state, id DESC
 LIMIT %(limit)s)
UNION ALL
(SELECT id, kind, state, queue, priority, attempts, max_attempts, progress, continues,
        run_at, updated_at, left(last_error, 300) AS last_error, NULL::bigint AS scanned_to,
        NULL::bigint AS scanned, NULL::bigint AS matches
 FROM awc.jobs
 WHERE %(newer)s
   AND state IN ('FAILED', 'CANCELLED')
   AND state = %(state)s
   AND id > %(after)s
   AND (%(kind)s::text IS NULL OR kind = %(kind)s)
   AND (%(queue)s::text IS NULL OR queue = %(queue)s)
   AND (%(payload)s::jsonb IS NULL OR payload @> %(payload)s::jsonb)
 ORDER BY state, id
 LIMIT %(limit)s)
