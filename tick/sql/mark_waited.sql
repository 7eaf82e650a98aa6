-- A producer about to wait for a job's outcome marks the job (SPEC §20,
-- docs/decisions/0033, migration 0022): its completion announces it on
-- `awc_final` only if marked, so completions nobody waits for send nothing.
-- Made on the job's row before the waiter reads the job: a completion that
-- takes the row after this commits reads it marked; one that took it first
-- makes this wait for its commit and match nothing, and the read that
-- follows finds the outcome. A job already final, or marked, is left alone.
UPDATE ONLY awc.jobs SET waited = true WHERE id = %(id)s AND NOT waited
