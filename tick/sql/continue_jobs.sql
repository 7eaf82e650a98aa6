-- Record Continue outcomes (SPEC §17), fenced: back to PENDING after the
-- handler's delay with its attempt refunded and `continues + 1`, the state it
-- gave saved as its checkpoint (a null in %(states)s keeps the last one: a job
-- cut at its deadline continues from the checkpoint it saved).
-- Rows by primary key, each finding its values by its position in the arrays
-- (no join to the batch: tests/test_plans.py).
-- The claim's token stays on the row: an outcome sent again after its answer
-- was lost with the connection is refused by the fence, and lost_claims.sql
-- reads by the token that the outcome recorded was this holder's own.
UPDATE ONLY awc.jobs AS j
SET state = 'PENDING',
    attempts = greatest(j.attempts, 1) - 1,
    continues = least(j.continues, 2147483646) + 1,
    checkpoint = coalesce(
        (%(states)s::text[])[array_position(%(ids)s::bigint[], j.id)]::jsonb, j.checkpoint),
    run_at = now() + make_interval(
        secs => (%(delays)s::float8[])[array_position(%(ids)s::bigint[], j.id)]),
    locked_by = NULL,
    locked_until = NULL,
    updated_at = now()
WHERE j.id = ANY (%(ids)s::bigint[])
  AND j.claim_token = (%(tokens)s::uuid[])[array_position(%(ids)s::bigint[], j.id)]
  AND j.state = 'RUNNING'
RETURNING j.id, j.state
