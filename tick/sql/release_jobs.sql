-- Release claimed jobs that did not run to an outcome (stop, unstarted claims),
-- fenced: back to PENDING, claimable at once, the attempt refunded (SPEC §4.2).
-- The batch's rows are taken by primary key (id = ANY) and each finds its own
-- token by its position in the arrays: with no join to the batch, no
-- plan can walk the RUNNING rows once per batch entry (tests/test_plans.py).
-- The claim's token stays on the row: an outcome sent again after its answer
-- was lost with the connection is refused by the fence, and lost_claims.sql
-- reads by the token that the outcome recorded was this holder's own.
UPDATE ONLY awc.jobs AS j
SET state = 'PENDING',
    attempts = greatest(j.attempts, 1) - 1,
    locked_by = NULL,
    locked_until = NULL,
    updated_at = now()
WHERE j.id = ANY (%(ids)s::bigint[])
  AND j.claim_token = (%(tokens)s::uuid[])[array_position(%(ids)s::bigint[], j.id)]
  AND j.state = 'RUNNING'
RETURNING j.id, j.state
