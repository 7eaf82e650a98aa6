-- Release claimed jobs that did not run to an outcome (stop, unstarted claims),
-- fenced: back to PENDING, claimable at once, the attempt refunded (SPEC §4.2).
-- The batch's rows are taken by primary key (id = ANY) and each finds its own
-- token by its position in the arrays: with no join to the batch, no
-- plan can walk the RUNNING rows once per batch entry (tests/test_plans.py).
UPDATE ONLY awc.jobs AS j
SET state = 'PENDING',
    attempts = greatest(j.attempts, 1) - 1,
    locked_by = NULL,
    locked_until = NULL,
    claim_token = NULL,
    updated_at = now()
WHERE j.id = ANY (%(ids)s::bigint[])
  AND j.claim_token = (%(tokens)s::uuid[])[array_position(%(ids)s::bigint[], j.id)]
  AND j.state = 'RUNNING'
RETURNING j.id, j.state
