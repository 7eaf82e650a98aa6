-- The console's job list (SPEC §19): newest first, keyset-paginated by id
-- below %(before)s. The filters are applied to a window of at most
-- %(window)s jobs read backwards through the primary key, so a filter that
-- matches nothing costs the same as one that matches everything; the last
-- row says where the window ended (`scanned_to`), and the next page
-- continues from there.
WITH window_rows AS (
    SELECT id, kind, state, queue, priority, attempts, max_attempts, progress, continues,
           run_at, updated_at, last_error
    FROM awc.jobs
    WHERE id < %(before)s
    ORDER BY id DESC
    LIMIT %(window)s
), matched AS (
    SELECT * FROM window_rows
    WHERE (%(state)s::text IS NULL OR state = %(state)s)
      AND (%(kind)s::text IS NULL OR kind = %(kind)s)
      AND (%(queue)s::text IS NULL OR queue = %(queue)s)
    ORDER BY id DESC
    LIMIT %(limit)s
)
SELECT id, kind, state, queue, priority, attempts, max_attempts, progress, continues,
       run_at, updated_at, last_error,
       (SELECT min(id) FROM window_rows) AS scanned_to,
       (SELECT count(*) FROM window_rows) AS scanned
FROM matched
UNION ALL
-- One row with no job when nothing matched, to carry where the window ended.
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       (SELECT min(id) FROM window_rows), (SELECT count(*) FROM window_rows)
WHERE NOT EXISTS (SELECT 1 FROM matched)
ORDER BY id DESC NULLS LAST
