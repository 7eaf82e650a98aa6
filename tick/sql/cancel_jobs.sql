-- Console bulk cancel (SPEC §4.2, §19): the PENDING or RUNNING jobs among
-- %(ids)s become CANCELLED; a running holder's outcome is fenced out, as
-- with a single cancel.
WITH cancelled AS (
    UPDATE ONLY awc.jobs
    SET state = 'CANCELLED',
        locked_by = NULL,
        locked_until = NULL,
        claim_token = NULL,
        finished_at = now(),
        updated_at = now()
    WHERE id = ANY(%(ids)s::bigint[])
      AND state IN ('PENDING', 'RUNNING')
    RETURNING id
)
SELECT count(*) FROM cancelled
