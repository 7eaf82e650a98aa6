-- Record Complete outcomes (SPEC §4.2, §5), fenced: a row is written only if
-- this claim still holds it. A job cancelled, rescued or re-claimed meanwhile
-- matches nothing and its outcome is discarded.
UPDATE awc.jobs AS j
SET state = 'COMPLETED',
    result = o.result,
    locked_by = NULL,
    locked_until = NULL,
    claim_token = NULL,
    finished_at = now(),
    updated_at = now()
FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[], %(results)s::jsonb[])
    AS o(id, token, result)
WHERE j.id = o.id
  AND j.claim_token = o.token
  AND j.state = 'RUNNING'
RETURNING j.id, j.state
