-- Operator cancel (SPEC §4.2): a PENDING or RUNNING job becomes CANCELLED. Its
-- claim token is cleared, so a running holder's outcome is fenced out.
UPDATE awc.jobs
SET state = 'CANCELLED',
    locked_by = NULL,
    locked_until = NULL,
    claim_token = NULL,
    finished_at = now(),
    updated_at = now()
WHERE id = %(id)s
  AND state IN ('PENDING', 'RUNNING')
RETURNING id
