-- A job's timeout apart from its lease (SPEC §26, docs/decisions/0031).
-- `timeout_secs` is how long one run of the job may take, set by its
-- producer (enqueue's `timeout_secs`, `awc enqueue --timeout`, or plain SQL);
-- null leaves it to the handler. The lease (`locked_until`) stays short and
-- the engine renews it while the job runs, so a dead worker's job comes back
-- in seconds however long the job may run. The bounds are the API's: 1 s to
-- 7 days; NaN is greater than every number, so the check refuses it too.
ALTER TABLE awc.jobs
    ADD COLUMN timeout_secs double precision,
    ADD CONSTRAINT jobs_timeout_secs_check
        CHECK (timeout_secs >= 1 AND timeout_secs <= 604800);

-- The claim's round trip reads the timeouts of the jobs it just took
-- (claimed_timeouts.sql: RUNNING, started by this transaction). Only jobs
-- that carry a timeout are in this index, so a queue whose producers set none
-- pays nothing but an empty probe.
CREATE INDEX jobs_timeout_claims_idx ON awc.jobs (started_at)
    WHERE state = 'RUNNING' AND timeout_secs IS NOT NULL;
