-- Heartbeat (SPEC §6): extend the leases still held by these claims. A claim
-- that matches nothing lost its job (cancelled, rescued or re-claimed).
-- The batch's rows are taken by primary key (id = ANY) and each finds its own
-- token and lease by its position in the arrays: with no join to the batch, no
-- plan can walk the RUNNING rows once per batch entry (tests/test_plans.py).
UPDATE ONLY awc.jobs AS j
SET locked_until = now() + make_interval(
        secs => (%(secs)s::float8[])[array_position(%(ids)s::bigint[], j.id)]),
    updated_at = now()
WHERE j.id = ANY (%(ids)s::bigint[])
  AND j.claim_token = (%(tokens)s::uuid[])[array_position(%(ids)s::bigint[], j.id)]
  AND j.state = 'RUNNING'
RETURNING j.id, extract(epoch FROM j.locked_until - now())::float8
