-- awc queue (SPEC §4.1, §14): the rescue index keyed by lease expiry alone.
--
-- 0001 declared it partial on state = 'RUNNING'. The fenced writes (complete,
-- retry, fail, release, extend) also say state = 'RUNNING', so the planner
-- could walk every RUNNING row through this index and probe the batch's
-- unnest() for each one, a nested loop of RUNNING x batch rows (35 ms for 256
-- completions against 512 RUNNING rows) where 256 primary-key probes take
-- 4 ms. locked_until is set by the claim and cleared by every exit from
-- RUNNING, so "locked_until IS NOT NULL" holds the same rows; the rescue's
-- "locked_until < now()" still implies it, and the fenced writes no longer do.
-- Building it reads the whole table once, holding off writes meanwhile.
DROP INDEX awc.jobs_lease_idx;

CREATE INDEX jobs_lease_idx ON awc.jobs (locked_until)
    WHERE locked_until IS NOT NULL;
