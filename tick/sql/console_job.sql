-- The console's job page (SPEC §19): every column, the JSON ones as text
-- cut to %(chars)s characters, so a value of any size or depth reaches the
-- page as bounded text that Python parses only if it is small.
SELECT id, kind, state, queue, priority, attempts, max_attempts, run_at, locked_by,
       locked_until, dedupe_key, created_at, updated_at, started_at, finished_at, progress,
       continues, left(last_error, %(chars)s), left(payload::text, %(chars)s),
       left(result::text, %(chars)s), left(checkpoint::text, %(chars)s)
FROM awc.jobs
WHERE id = %(id)s
