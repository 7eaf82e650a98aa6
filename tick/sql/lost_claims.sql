-- Which of these claims no longer hold their job, the job's state now
-- (CANCELLED when an operator cancelled it, else rescued or re-claimed), and
-- whether the row still carries the claim's token: then the outcome recorded
-- is the holder's own, sent again after its answer was lost with the
-- connection (the outcome statements keep the token; an operator's action, a
-- rescue and a new claim replace it). A completed job is in a finished part
-- (awc.jobs with its parts): read in the hot table alone, it was called
-- MISSING.
SELECT o.id, coalesce(j.state, 'MISSING'), coalesce(j.claim_token = o.token, false)
FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[]) AS o(id, token)
LEFT JOIN awc.jobs AS j ON j.id = o.id
WHERE j.id IS NULL
   OR j.claim_token IS DISTINCT FROM o.token
   OR j.state <> 'RUNNING'
