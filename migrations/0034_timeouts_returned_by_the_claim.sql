-- The claim statements return each claimed job's own timeout (SPEC §26,
-- docs/decisions/0031, amended): the statement that read them after each
-- claim (claimed_timeouts.sql) is gone, and with it the only reader of this
-- index, which held the RUNNING jobs with a timeout by start.
DROP INDEX awc.jobs_timeout_claims_idx;
