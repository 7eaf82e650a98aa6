-- Heartbeat (SPEC §6): extend the leases still held by these claims. A claim
-- that matches nothing lost its job (cancelled, rescued or re-claimed).
UPDATE awc.jobs AS j
SET locked_until = now() + make_interval(secs => o.secs),
    updated_at = now()
FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[], %(secs)s::float8[]) AS o(id, token, secs)
WHERE j.id = o.id
  AND j.claim_token = o.token
  AND j.state = 'RUNNING'
RETURNING j.id, extract(epoch FROM j.locked_until - now())::float8
