-- One job in full, for `awc jobs show`: with its checkpoint (SPEC §17), its
-- error history (SPEC §22), its own timeout (SPEC §26; null: its handler's),
-- its fair-share key (SPEC §23) and the trace context it was enqueued with (§21).
SELECT id, kind, state, queue, key, priority, attempts, max_attempts, timeout_secs, run_at,
       locked_by, locked_until, result, last_error, dedupe_key, created_at, updated_at, started_at,
       finished_at, progress, continues, checkpoint, payload, errors, trace_context
FROM awc.jobs
WHERE id = %(id)s
