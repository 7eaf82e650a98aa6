-- The running jobs holding any of these tokens: those a claim whose answer
-- was lost with the connection took (tick.queue.lost_tokens), if its
-- transaction committed. They are then released as any release is
-- (release_jobs.sql, fenced by the token). Read by the lease index: as many
-- rows as are running, never the backlog.
SELECT j.id, j.claim_token::text
FROM ONLY awc.jobs AS j
WHERE j.locked_until IS NOT NULL
  AND j.state = 'RUNNING'
  AND j.claim_token = ANY (%(tokens)s::uuid[])
