-- Checkpoints and continuation (SPEC §17): a job of any length finishes
-- across a chain of bounded ticks. `checkpoint` is the state its handler last
-- saved, `progress` how far it says it is (0..1), `continues` how many times
-- it handed the rest of its work to a later claim (never spending an attempt).
ALTER TABLE awc.jobs
    ADD COLUMN checkpoint jsonb,
    ADD COLUMN progress   real,
    ADD COLUMN continues  integer NOT NULL DEFAULT 0,
    ADD CONSTRAINT jobs_progress_check CHECK (progress >= 0 AND progress <= 1);
