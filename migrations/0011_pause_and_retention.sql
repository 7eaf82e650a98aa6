-- Operator actions (SPEC §22). `awc pause` holds a kind or queue back with a
-- max_running of 0 and remembers what the limit was, so `awc resume` puts it
-- back: `paused` marks a limit a pause set, `paused_from` the max_running it
-- had before (NULL: none). A limit with neither max_running nor a rate after
-- a resume existed only for the pause and is removed.
ALTER TABLE awc.limits
    ADD COLUMN paused boolean NOT NULL DEFAULT false,
    ADD COLUMN paused_from integer;

-- AWC_DEAD_LETTER_RETENTION_SECS: the prune reads old FAILED jobs oldest
-- first from here, in bounded batches, never the whole dead-letter set. Its
-- "finished_at IS NOT NULL" only a finished_at comparison proves, so the
-- console's dead-letter lists keep reading jobs_dead_idx in id order.
-- Building it reads the table once, holding off writes meanwhile, as 0003 did.
CREATE INDEX jobs_failed_finished_idx ON awc.jobs (finished_at)
    WHERE state = 'FAILED' AND finished_at IS NOT NULL;
