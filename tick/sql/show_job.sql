-- One job in full, for `awc jobs show`: with its checkpoint (SPEC §17) and
-- its error history (SPEC §22), and its own timeout (SPEC §26; null: its handler's).
SELECT id, kind, state, queue, priority, attempts, max_attempts, timeout_secs, run_at, locked_by,
       locked_until, result, last_error, dedupe_key, created_at, updated_at, started_at,
       finished_at, progress, continues, checkpoint, payload, errors
FROM awc.jobs
WHERE id = %(id)s
