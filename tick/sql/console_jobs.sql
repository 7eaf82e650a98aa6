-- The console's job list (SPEC §19, §22): newest first, keyset-paginated by
-- id below %(before)s, or, for the Newer link, the page just above
-- %(after)s (when %(newer)s: the window is read forwards, the page shown
-- newest first all the same). The filters (state, kind, queue, and a
-- payload search `payload @> %(payload)s`) are applied to a window of at
-- most %(window)s jobs read through the primary key, so a filter that
-- matches nothing costs the same as one that matches everything; a payload
-- search reads each window row's payload by its id, never the table. Each
-- row says where the window ended (`scanned_to`), how many it read, and how
-- many in it matched (`matches`, at most the window: the page's capped
-- count); the next page continues from there. Only the rows shown are read
-- in full.
WITH window_rows AS (
    (SELECT id, state, kind, queue
     FROM awc.jobs
     WHERE NOT %(newer)s AND id < %(before)s
     ORDER BY id DESC
     LIMIT %(window)s)
    UNION ALL
    (SELECT id, state, kind, queue
     FROM awc.jobs
     WHERE %(newer)s AND id > %(after)s
     ORDER BY id
     LIMIT %(window)s)
), hits AS (
    SELECT w.id FROM window_rows AS w
    WHERE (%(state)s::text IS NULL OR w.state = %(state)s)
      AND (%(kind)s::text IS NULL OR w.kind = %(kind)s)
      AND (%(queue)s::text IS NULL OR w.queue = %(queue)s)
      AND (%(payload)s::jsonb IS NULL
           OR (SELECT p.payload FROM awc.jobs AS p WHERE p.id = w.id) @> %(payload)s::jsonb)
), matched AS (
    SELECT id FROM hits
    ORDER BY CASE WHEN %(newer)s THEN id END, id DESC
    LIMIT %(limit)s
), extent AS (
    SELECT CASE WHEN %(newer)s THEN max(id) ELSE min(id) END AS scanned_to,
           count(*) AS scanned, (SELECT count(*) FROM hits) AS matches
    FROM window_rows
)
SELECT j.id, j.kind, j.state, j.queue, j.priority, j.attempts, j.max_attempts, j.progress,
       j.continues, j.run_at, j.updated_at, left(j.last_error, 300) AS last_error,
       e.scanned_to, e.scanned, e.matches
FROM matched AS m
JOIN awc.jobs AS j ON j.id = m.id
CROSS JOIN extent AS e
UNION ALL
-- One row with no job when nothing matched, to carry where the window ended.
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       e.scanned_to, e.scanned, e.matches
FROM extent AS e
WHERE NOT EXISTS (SELECT 1 FROM matched)
ORDER BY 1 DESC NULLS LAST
