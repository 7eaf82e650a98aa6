-- The console's job list (SPEC §19): newest first, keyset-paginated by id
-- below %(before)s. The filters are applied to a window of at most
-- %(window)s jobs read backwards through the primary key, so a filter that
-- matches nothing costs the same as one that matches everything; each row
-- says where the window ended (`scanned_to`) and how many it read, and the
-- next page continues from there. Only the rows shown are read in full.
WITH window_rows AS (
    SELECT id, state, kind, queue
    FROM awc.jobs
    WHERE id < %(before)s
    ORDER BY id DESC
    LIMIT %(window)s
), matched AS (
    SELECT id FROM window_rows
    WHERE (%(state)s::text IS NULL OR state = %(state)s)
      AND (%(kind)s::text IS NULL OR kind = %(kind)s)
      AND (%(queue)s::text IS NULL OR queue = %(queue)s)
    ORDER BY id DESC
    LIMIT %(limit)s
), extent AS (
    SELECT min(id) AS scanned_to, count(*) AS scanned FROM window_rows
)
SELECT j.id, j.kind, j.state, j.queue, j.priority, j.attempts, j.max_attempts, j.progress,
       j.continues, j.run_at, j.updated_at, left(j.last_error, 300) AS last_error,
       e.scanned_to, e.scanned
FROM matched AS m
JOIN awc.jobs AS j ON j.id = m.id
CROSS JOIN extent AS e
UNION ALL
-- One row with no job when nothing matched, to carry where the window ended.
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       e.scanned_to, e.scanned
FROM extent AS e
WHERE NOT EXISTS (SELECT 1 FROM matched)
ORDER BY 1 DESC NULLS LAST
