-- Enqueue many jobs in one statement (SPEC §4.3). Rows are inserted in input
-- order, so identities ascend in input order; a row whose dedupe_key is held
-- by a live job (or by an earlier row of the batch) inserts nothing. Each
-- row's trace context is its W3C text map (SPEC §21), or null.
INSERT INTO awc.jobs (kind, payload, max_attempts, run_at, priority, queue, dedupe_key,
                      timeout_secs, trace_context, key)
SELECT kind, payload, max_attempts, coalesce(run_at, now()), priority, queue, dedupe_key,
       timeout_secs, trace_context, key
FROM unnest(%(kinds)s::text[], %(payloads)s::jsonb[], %(max_attempts)s::int[],
            %(run_ats)s::timestamptz[], %(priorities)s::smallint[], %(queues)s::text[],
            %(dedupe_keys)s::text[], %(timeouts)s::float8[], %(trace_contexts)s::jsonb[],
            %(keys)s::text[])
    WITH ORDINALITY AS t(kind, payload, max_attempts, run_at, priority, queue, dedupe_key,
                         timeout_secs, trace_context, key, ord)
ORDER BY ord
ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL AND state IN ('PENDING', 'RUNNING')
DO NOTHING
RETURNING id, dedupe_key
