-- Whether a per-key pause holds a job (SPEC §23): its key's own limit at
-- max_running 0, or key:* at 0 for a key without a limit of its own, or its
-- kind's per-key limit (kind:K --per-key) at 0. The lane claim
-- (claim_limited_jobs.sql) reads past such jobs, and does not count them as
-- held back: else a lane whose oldest jobs were paused claimed nothing, and
-- a tick ran to its deadline, while jobs the pause does not cover waited.
-- One SQL expression, inlined where it is used; probes of awc.limits by key.
CREATE FUNCTION awc.key_paused(job_key text, job_kind text) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
    SELECT job_key IS NOT NULL AND (
        coalesce((SELECT l.max_running IS NOT DISTINCT FROM 0 FROM awc.limits AS l
                  WHERE l.scope = 'key' AND l.name = job_key),
                 EXISTS (SELECT 1 FROM awc.limits AS l
                         WHERE l.scope = 'key' AND l.name = '*' AND l.max_running = 0))
        OR EXISTS (SELECT 1 FROM awc.limits AS l
                   WHERE l.scope = 'kind_key' AND l.name = job_kind AND l.max_running = 0))
$$;
