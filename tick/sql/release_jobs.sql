-- Release claimed jobs that did not run to an outcome (stop, unstarted claims),
-- fenced: back to PENDING, claimable at once, the attempt refunded (SPEC §4.2).
UPDATE awc.jobs AS j
SET state = 'PENDING',
    attempts = greatest(j.attempts - 1, 0),
    locked_by = NULL,
    locked_until = NULL,
    claim_token = NULL,
    updated_at = now()
FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[]) AS o(id, token)
WHERE j.id = o.id
  AND j.claim_token = o.token
  AND j.state = 'RUNNING'
RETURNING j.id, j.state
