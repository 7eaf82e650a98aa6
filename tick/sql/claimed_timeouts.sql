-- The timeouts of the jobs this transaction's claim just took (SPEC §26):
-- sent after the claim in the same exchange, it sees the claim's rows as
-- RUNNING with started_at = now() (the transaction's start, the same for
-- every statement in it). Only jobs that carry a timeout are in
-- jobs_timeout_claims_idx, so when producers set none this is one probe of
-- an empty index. Another claimer's transaction that started in the same
-- microsecond may match too: the engine keeps only the ids it claimed.
SELECT j.id, j.timeout_secs
FROM ONLY awc.jobs AS j
WHERE j.state = 'RUNNING'
  AND j.timeout_secs IS NOT NULL
  AND j.started_at = now()
  AND j.locked_by = ANY (%(slots)s::text[])
