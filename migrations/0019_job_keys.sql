-- Fair share across keys (SPEC §23, docs/decisions/0034).
-- `key` names the tenant, customer or other unit a job belongs to; a claim
-- takes ready jobs of one priority round-robin across keys. Adding a column
-- without a default rewrites nothing; the check reads the table once. `*`
-- is refused: it names every key in a limit's scope.
ALTER TABLE awc.jobs
    ADD COLUMN key text,
    ADD CONSTRAINT jobs_key_check CHECK (char_length(key) BETWEEN 1 AND 200 AND key <> '*');

-- The fair claim's walk (claim_keyed_jobs.sql): claim order within a key, a
-- key's head one probe away, the keys of one priority in order for a skip
-- scan. Jobs without a key are the key '' (no real key is empty).
CREATE INDEX jobs_ready_key_idx ON awc.jobs ((-priority::int), (coalesce(key, '')), run_at, id)
    WHERE state = 'PENDING' AND waiting = 0;
-- Whether any keyed job is ready: one probe, so that without keys the claim
-- is the plain walk it was before them.
CREATE INDEX jobs_keyed_idx ON awc.jobs (run_at)
    WHERE state = 'PENDING' AND waiting = 0 AND key IS NOT NULL;

-- Per-key limits (SPEC §23): `key` (name: one key, or '*' for every key its
-- own limit) and `kind_key` (name: a kind; each key within it its own
-- limit). The claim counts a key's RUNNING jobs through this index, never
-- every RUNNING job.
ALTER TABLE awc.limits DROP CONSTRAINT limits_scope_check;
ALTER TABLE awc.limits ADD CONSTRAINT limits_scope_check
    CHECK (scope IN ('kind', 'queue', 'key', 'kind_key'));
CREATE INDEX jobs_running_key_idx ON awc.jobs (key, kind)
    WHERE state = 'RUNNING' AND key IS NOT NULL;
-- A per-key rate logs each key's claims: the key it counts for (null for a
-- kind's or a queue's claims). No default: adding it rewrites nothing.
ALTER TABLE awc.limit_claims ADD COLUMN key text;
CREATE INDEX limit_claims_key_idx ON awc.limit_claims (scope, name, key, at)
    WHERE key IS NOT NULL;
