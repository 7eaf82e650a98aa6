-- Global limits (SPEC §18, docs/decisions/0012): per kind or per queue, at
-- most `max_running` RUNNING jobs with unexpired leases, and at most `rate`
-- claims in any window of `per_secs` seconds, across every claimer at once.
CREATE TABLE awc.limits (
    scope       text    NOT NULL,
    name        text    NOT NULL,
    max_running integer,
    rate        integer,
    per_secs    integer,
    PRIMARY KEY (scope, name),
    CONSTRAINT limits_scope_check CHECK (scope IN ('kind', 'queue')),
    CONSTRAINT limits_max_running_check CHECK (max_running >= 0),
    CONSTRAINT limits_rate_check
        CHECK ((rate IS NULL) = (per_secs IS NULL) AND rate >= 1 AND per_secs >= 1)
);

-- The claims a rate limit counts: one row per claimed job, stamped under
-- the limit's row lock; rows older than the window are deleted by the claim.
CREATE TABLE awc.limit_claims (
    scope text        NOT NULL,
    name  text        NOT NULL,
    at    timestamptz NOT NULL,
    FOREIGN KEY (scope, name) REFERENCES awc.limits (scope, name) ON DELETE CASCADE
);
CREATE INDEX limit_claims_window_idx ON awc.limit_claims (scope, name, at);

-- A limited kind's ready jobs in claim order, without walking every other
-- kind's (jobs_ready_queue_idx serves limited queues).
CREATE INDEX jobs_ready_kind_idx ON awc.jobs (kind, priority DESC, run_at, id)
    WHERE state = 'PENDING';
