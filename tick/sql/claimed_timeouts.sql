-- The timeouts of the jobs this transaction's claim just took (SPEC §26):
-- sent after the claim in the same exchange, it sees the claim's rows as
-- RUNNING, started no earlier than the transaction (the walk stamps the
-- claim statement's start; the fair claim and the lanes, the clock under
-- their limits' locks: `started_at = now()` missed theirs, and a keyed or
-- limited job ran under its handler's timeout, not its own). Only jobs that
-- carry a timeout are in jobs_timeout_claims_idx, so when producers set
-- none this is one probe of an empty index. Another claimer's claims since
-- may match too: the engine keeps only the ids it claimed.
SELECT j.id, j.timeout_secs
FROM ONLY awc.jobs AS j
WHERE j.state = 'RUNNING'
  AND j.timeout_secs IS NOT NULL
  AND j.started_at >= now()
  AND j.locked_by = ANY (%(slots)s::text[])
