-- Enqueue one job (SPEC §4.3). A dedupe_key already held by a PENDING or
-- RUNNING job inserts nothing and returns that job's id. The trace context is
-- the W3C text map the producer's span gave (SPEC §21), or null.
WITH inserted AS (
    INSERT INTO awc.jobs (kind, payload, max_attempts, run_at, priority, queue, dedupe_key,
                          timeout_secs, trace_context, key)
    VALUES (%(kind)s, %(payload)s::jsonb, %(max_attempts)s, coalesce(%(run_at)s::timestamptz, now()),
            %(priority)s, %(queue)s, %(dedupe_key)s, %(timeout_secs)s::float8,
            %(trace_context)s::jsonb, %(key)s::text)
    ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL AND state IN ('PENDING', 'RUNNING')
    DO NOTHING
    RETURNING id
)
SELECT id FROM inserted
UNION ALL
SELECT id FROM ONLY awc.jobs
WHERE dedupe_key = %(dedupe_key)s
  AND state IN ('PENDING', 'RUNNING')
  AND NOT EXISTS (SELECT 1 FROM inserted)
LIMIT 1
