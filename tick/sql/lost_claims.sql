-- Which of these claims no longer hold their job, and the job's state now
-- (CANCELLED when an operator cancelled it, else rescued or re-claimed). A
-- completed job is in a finished part (awc.jobs with its parts): read in the
-- hot table alone, it was called MISSING.
SELECT o.id, coalesce(j.state, 'MISSING')
FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[]) AS o(id, token)
LEFT JOIN awc.jobs AS j ON j.id = o.id
WHERE j.id IS NULL
   OR j.claim_token IS DISTINCT FROM o.token
   OR j.state <> 'RUNNING'
