-- Checkpoints and continuation (SPEC §17): a job of any length finishes
-- across a chain of bounded ticks. `checkpoint` is the state its handler last
-- saved, `progress` how far it says it is (0..1), `continues` how many times
-- it handed the rest of its work to a later claim (never spending an attempt).
ALTER TABLE awc.jobs
    ADD COLUMN checkpoint jsonb,
    ADD COLUMN progress   real,
    ADD COLUMN continues  integer NOT NULL DEFAULT 0,
    ADD CONSTRAINT jobs_progress_check CHECK (progress >= 0 AND progress <= 1);

-- The journal of a built-in closure walk that spans claims (SPEC §17,
-- docs/decisions/0011): each (digest, type) the walk visited with what it
-- found, and each one it still has to visit (`todo`). Written in batches by
-- the job's current claim only; resumed by the next claim of the same job;
-- deleted with the job, or by the handler when the walk is done.
CREATE TABLE awc.walk_marks (
    job_id bigint NOT NULL REFERENCES awc.jobs (id) ON DELETE CASCADE,
    digest text   NOT NULL,
    type   text   NOT NULL,
    status text   NOT NULL,
    PRIMARY KEY (job_id, digest, type),
    CONSTRAINT walk_marks_type_check CHECK (type IN ('blob', 'tree')),
    CONSTRAINT walk_marks_status_check
        CHECK (status IN ('todo', 'seen', 'present', 'missing', 'unparsed', 'mismatch'))
);
