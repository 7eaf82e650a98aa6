-- Claim a batch of ready jobs (SPEC §4.2), one per free slot named in %(slots)s.
-- SKIP LOCKED lets concurrent claimers take disjoint batches without waiting.
-- The lease is the handler's own (%(leases)s, kind -> seconds) or the default,
-- never longer than %(cap)s, the time left before the tick's deadline (§6).
WITH limited AS MATERIALIZED (  -- SPEC §18: step 1 named them; step 2 said if this claims
    SELECT (SELECT coalesce(nullif(current_setting('awc.limited_kinds', true), ''), '{}'))::text[]
               AS kinds,
           (SELECT coalesce(nullif(current_setting('awc.limited_queues', true), ''), '{}'))::text[]
               AS queues,
           (SELECT coalesce(nullif(current_setting('awc.limited_claimed', true), ''), '0'))::int
               AS claimed,
           (SELECT coalesce(nullif(current_setting('awc.walk', true), ''), 'false'))::boolean
               AS walk
), ready AS (
    SELECT id, row_number() OVER () AS n
    FROM (
        SELECT id
        FROM awc.jobs
        WHERE state = 'PENDING'
          AND run_at <= now()
          AND (%(kinds)s::text[] IS NULL OR kind = ANY (%(kinds)s::text[]))
          -- A limit that may bind: step 2 claimed, in priority order, by lane.
          AND (SELECT cardinality(kinds) + cardinality(queues) = 0 OR walk FROM limited)
        ORDER BY priority DESC, run_at, id
        LIMIT cardinality(%(slots)s::text[]) - (SELECT claimed FROM limited)
        FOR UPDATE SKIP LOCKED
    ) AS picked
)
UPDATE awc.jobs AS j
SET state = 'RUNNING',
    attempts = j.attempts + 1,
    locked_by = (%(slots)s::text[])[ready.n + (SELECT claimed FROM limited)],
    locked_until = now() + make_interval(secs => least(
        coalesce((%(leases)s::jsonb ->> j.kind)::float8, %(lease)s::float8), %(cap)s::float8)),
    claim_token = gen_random_uuid(),
    started_at = now(),
    updated_at = now()
FROM ready
WHERE j.id = ready.id
RETURNING j.id, j.kind, j.payload::text, j.attempts, j.max_attempts, j.claim_token::text,
    j.locked_by, extract(epoch FROM j.locked_until - now())::float8,
    -- An infinite run_at (-infinity: ready since always) has no measurable wait;
    -- subtracting it would fail the whole claim (SPEC §4.2).
    coalesce(extract(epoch FROM now() - CASE WHEN isfinite(j.run_at) THEN j.run_at END)::float8, 0),
    -- What an earlier claim's last checkpoint saved (SPEC §17): ctx.saved.
    j.checkpoint::text
