-- Record Fail outcomes (SPEC §5), fenced: dead-letter at once, never retried.
-- The batch's rows are taken by primary key (id = ANY) and each finds its own
-- token and error by its position in the arrays: with no join to the batch, no
-- plan can walk the RUNNING rows once per batch entry (tests/test_plans.py).
UPDATE awc.jobs AS j
SET state = 'FAILED',
    last_error = (%(errors)s::text[])[array_position(%(ids)s::bigint[], j.id)],
    finished_at = now(),
    locked_by = NULL,
    locked_until = NULL,
    claim_token = NULL,
    updated_at = now()
WHERE j.id = ANY (%(ids)s::bigint[])
  AND j.claim_token = (%(tokens)s::uuid[])[array_position(%(ids)s::bigint[], j.id)]
  AND j.state = 'RUNNING'
RETURNING j.id, j.state
