-- Which of these claims no longer hold their job, and the job's state now
-- (CANCELLED when an operator cancelled it, else rescued or re-claimed).
SELECT o.id, coalesce(j.state, 'MISSING')
FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[]) AS o(id, token)
LEFT JOIN ONLY awc.jobs AS j ON j.id = o.id
WHERE j.id IS NULL
   OR j.claim_token IS DISTINCT FROM o.token
   OR j.state <> 'RUNNING'
