-- Record Fail outcomes (SPEC §5), fenced: dead-letter at once, never retried.
UPDATE awc.jobs AS j
SET state = 'FAILED',
    last_error = o.error,
    finished_at = now(),
    locked_by = NULL,
    locked_until = NULL,
    claim_token = NULL,
    updated_at = now()
FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[], %(errors)s::text[])
    AS o(id, token, error)
WHERE j.id = o.id
  AND j.claim_token = o.token
  AND j.state = 'RUNNING'
RETURNING j.id, j.state
