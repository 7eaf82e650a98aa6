-- The console's job page (SPEC §19): every column, the JSON ones as text
-- cut to %(chars)s characters, so a value of any size or depth reaches the
-- page as bounded text that Python parses only if it is small. The error
-- history (SPEC §22) comes newest first, its 20 newest entries at most, each
-- field cut (an entry awc wrote is smaller; a row written by hand may not be).
SELECT id, kind, state, queue, priority, attempts, max_attempts, run_at, locked_by,
       locked_until, dedupe_key, key, timeout_secs, created_at, updated_at, started_at, finished_at, progress,
       continues, left(last_error, %(chars)s), left(payload::text, %(chars)s),
       left(result::text, %(chars)s), left(checkpoint::text, %(chars)s),
       (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'attempt', left(e ->> 'attempt', 20),
                   'at', left(e ->> 'at', 40),
                   'error', left(e ->> 'error', 1000),
                   'traceback', left(e ->> 'traceback', 10000)) ORDER BY n DESC), '[]')::text
        FROM jsonb_array_elements(jsonb_path_query_array(errors, '$[last - 19 to last]'))
             WITH ORDINALITY AS t (e, n))
FROM awc.jobs
WHERE id = %(id)s
