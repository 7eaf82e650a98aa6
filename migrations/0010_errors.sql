-- Why it failed (SPEC §22): one entry per failed run of a job (a Retry, a
-- Fail, a deadline cut, an uncaught exception, a lost lease), oldest first,
-- the 20 newest kept: {attempt, at, error, traceback?}. Appended by the same
-- fenced statements that record the outcome (retry_jobs, fail_jobs,
-- rescue_jobs). A constant default adds the column without rewriting the
-- table (PostgreSQL 11+).
ALTER TABLE awc.jobs
    ADD COLUMN errors jsonb NOT NULL DEFAULT '[]';
