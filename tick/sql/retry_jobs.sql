-- Record Retry outcomes (SPEC §5), fenced: back to PENDING after the backoff
-- delay chosen by the worker, or FAILED (dead letter) once attempts are spent.
UPDATE awc.jobs AS j
SET state = CASE WHEN j.attempts >= j.max_attempts THEN 'FAILED' ELSE 'PENDING' END,
    run_at = CASE WHEN j.attempts >= j.max_attempts THEN j.run_at
                  ELSE now() + make_interval(secs => o.delay) END,
    finished_at = CASE WHEN j.attempts >= j.max_attempts THEN now() END,
    last_error = o.error,
    locked_by = NULL,
    locked_until = NULL,
    claim_token = NULL,
    updated_at = now()
FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[], %(errors)s::text[], %(delays)s::float8[])
    AS o(id, token, error, delay)
WHERE j.id = o.id
  AND j.claim_token = o.token
  AND j.state = 'RUNNING'
RETURNING j.id, j.state
