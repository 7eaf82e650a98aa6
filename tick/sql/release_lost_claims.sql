-- Release the jobs a claim whose answer was lost with the connection took,
-- if its transaction committed (SPEC §4.2, docs/decisions/0035): the
-- claim's tokens are known (tick.queue.lost_tokens) though its jobs are not.
-- Back to PENDING, claimable at once, the attempt refunded, as a release is;
-- else they waited out leases no one holds, an attempt spent (a job with
-- one attempt failed without having run). The running jobs are read by the
-- lease index: as many as are running, never the backlog.
UPDATE ONLY awc.jobs AS j
SET state = 'PENDING',
    attempts = greatest(j.attempts, 1) - 1,
    locked_by = NULL,
    locked_until = NULL,
    updated_at = now()
WHERE j.locked_until IS NOT NULL
  AND j.state = 'RUNNING'
  AND j.claim_token = ANY (%(tokens)s::uuid[])
