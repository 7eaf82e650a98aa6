-- Enqueue many jobs in one statement (SPEC §4.3). Rows are inserted in input
-- order, so identities ascend in input order; a row whose dedupe_key is held
-- by a live job (or by an earlier row of the batch) inserts nothing. Each
-- row's trace context is its W3C text map (SPEC §21), or null. The jobs of a
-- graph (SPEC §20) carry their marks: the parents each waits for, whether it
-- is a parent, its on_parent_failure (null arrays: none of them a graph's).
INSERT INTO awc.jobs (kind, payload, max_attempts, run_at, priority, queue, dedupe_key,
                      timeout_secs, trace_context, key, waiting, has_children,
                      on_parent_failure)
SELECT kind, payload, max_attempts, coalesce(run_at, now()), priority, queue, dedupe_key,
       timeout_secs, trace_context, key, coalesce(waiting, 0), coalesce(has_children, false),
       coalesce(policy, 'cancel')
FROM unnest(%(kinds)s::text[], %(payloads)s::jsonb[], %(max_attempts)s::int[],
            %(run_ats)s::timestamptz[], %(priorities)s::smallint[], %(queues)s::text[],
            %(dedupe_keys)s::text[], %(timeouts)s::float8[], %(trace_contexts)s::jsonb[],
            %(keys)s::text[], %(waiting)s::int[], %(has_children)s::boolean[],
            %(policies)s::text[])
    WITH ORDINALITY AS t(kind, payload, max_attempts, run_at, priority, queue, dedupe_key,
                         timeout_secs, trace_context, key, waiting, has_children, policy, ord)
ORDER BY ord
ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL AND state IN ('PENDING', 'RUNNING')
DO NOTHING
RETURNING id, dedupe_key
