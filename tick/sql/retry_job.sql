-- Operator retry (SPEC §4.2): a FAILED or CANCELLED job returns to PENDING with
-- a fresh attempt budget, claimable at once; waiting loops are woken.
WITH revived AS (
    UPDATE awc.jobs
    SET state = 'PENDING',
        attempts = 0,
        run_at = now(),
        result = NULL,
        finished_at = NULL,
        locked_by = NULL,
        locked_until = NULL,
        claim_token = NULL,
        updated_at = now()
    WHERE id = %(id)s
      AND state IN ('FAILED', 'CANCELLED')
    RETURNING id
)
SELECT id, pg_notify('awc_jobs', '') FROM revived
