-- The console's capped match count for a FAILED or CANCELLED list (SPEC
-- §19, §22): among the newest %(cap)s jobs of that state, read through
-- jobs_dead_idx, how many match the kind, queue and payload filters, and how
-- many were read (when that is the cap, the page says "at least").
SELECT count(*) FILTER (WHERE (%(kind)s::text IS NULL OR kind = %(kind)s)
                          AND (%(queue)s::text IS NULL OR queue = %(queue)s)
                          AND (%(payload)s::jsonb IS NULL OR payload @> %(payload)s::jsonb))
           AS matches,
       count(*) AS scanned
FROM (SELECT kind, queue, payload FROM awc.jobs
      WHERE state IN ('FAILED', 'CANCELLED')
        AND state = %(state)s
      ORDER BY state, id DESC
      LIMIT %(cap)s) AS dead
