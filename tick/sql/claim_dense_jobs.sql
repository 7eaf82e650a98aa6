-- The fair claim's one-pass form (SPEC §23, docs/decisions/0034), sent in
-- its place when the last fair claim said it would do (`dense`): many keys
-- with a few ready jobs each, the usual multi-tenant queue. It claims what
-- claim_keyed_jobs.sql claims then (its `dense` read: each key's head, in
-- one pass of jobs_ready_key_idx from the key cursor, one key a slot), in a
-- statement a sixth of that one's size: PostgreSQL sets up every node of a
-- plan on each execution, and the full fair claim's setup alone cost 0.7 ms
-- a claim, what 64 no-op jobs take to run.
--
-- It claims only when that read holds: no kind or queue filter, no global
-- or per-key limit that may bind, the top priority the one the key cursors
-- served last (so the next cursors are that priority's key moved on, as the
-- full claim would leave them), and a ready head for every slot within the
-- pass. Otherwise it claims nothing and says so (`dense` false): the engine
-- sends the full fair claim at once. When no keyed job is ready it leaves
-- `awc.keyed_claimed` at -1 (`fair` false), as the full claim does.
WITH limited AS MATERIALIZED (  -- SPEC §18: step 1 named them; step 2 said if this claims
    SELECT (cardinality(coalesce(nullif(current_setting('awc.limited_kinds', true), ''),
                                 '{}')::text[])
            + cardinality(coalesce(nullif(current_setting('awc.limited_queues', true), ''),
                                   '{}')::text[]) = 0
            OR coalesce(nullif(current_setting('awc.walk', true), ''), 'false')::boolean)
               AS free,
           coalesce(nullif(current_setting('awc.key_limited', true), ''), 'false')::boolean
               AS keyed_limits,
           coalesce(nullif(current_setting('awc.limited_claimed', true), ''), '0')::int
               AS lane_claimed
), plan AS MATERIALIZED (
    SELECT l.free
           AND EXISTS (SELECT 1 FROM ONLY awc.jobs AS j
                       WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.key IS NOT NULL
                         AND j.run_at <= now()) AS go,
           NOT l.keyed_limits AND %(kinds)s::text[] IS NULL AND %(queues)s::text[] IS NULL
               AS plain,
           cardinality(%(slots)s::text[]) AS want,
           coalesce(%(key_after)s::jsonb, '{}') AS cursors
    FROM limited AS l
), top AS MATERIALIZED (  -- the top priority with a ready job, if the cursors served it last
    SELECT t.p
    FROM plan, (SELECT -j.priority::int AS p FROM ONLY awc.jobs AS j
                WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.run_at <= now()
                ORDER BY -j.priority::int LIMIT 1) AS t
    WHERE plan.go AND plan.plain AND plan.want > 0 AND plan.cursors -> '~' ->> 0 = t.p::text
), dense AS MATERIALIZED (
    -- claim_keyed_jobs.sql's `dense`: the heads of the keys after the
    -- cursor, at most four entries a slot read, a key whose first job is not
    -- due passed by (its first job is its earliest).
    SELECT h.k, h.id
    FROM plan, top, LATERAL (
        SELECT u.k, u.id
        FROM (SELECT DISTINCT ON (s.k) s.k, s.run_at, s.id
              FROM (SELECT coalesce(j.key, '') AS k, j.run_at, j.id
                    FROM ONLY awc.jobs AS j
                    WHERE j.state = 'PENDING' AND j.waiting = 0
                      AND -j.priority::int = top.p
                      AND coalesce(j.key, '') > coalesce(plan.cursors ->> top.p::text,
                                                         plan.cursors ->> '*', '')
                    ORDER BY -j.priority::int, coalesce(j.key, ''), j.run_at, j.id
                    LIMIT 4 * plan.want) AS s
              ORDER BY s.k, s.run_at, s.id) AS u  -- one priority: the index's order
        WHERE u.run_at <= now()
        LIMIT plan.want) AS h
), held AS MATERIALIZED (  -- a ready head for every slot
    SELECT count(*) = (SELECT want FROM plan) AS go, max(k) AS last FROM dense
), locked AS MATERIALIZED (
    -- The heads themselves (SKIP LOCKED: one another claimer took is left).
    SELECT j.id, j.run_at
    FROM ONLY awc.jobs AS j
    WHERE (SELECT go FROM held) AND j.id = ANY (ARRAY(SELECT id FROM dense))
      AND j.state = 'PENDING' AND j.waiting = 0 AND j.run_at <= now()
    ORDER BY j.id
    FOR UPDATE OF j SKIP LOCKED
), allowed AS MATERIALIZED (
    SELECT l.id, row_number() OVER (ORDER BY l.run_at, l.id) AS n
    FROM locked AS l
), claimed AS (
    UPDATE ONLY awc.jobs AS j
    SET state = 'RUNNING',
        attempts = least(j.attempts, 2147483646) + 1,  -- int max: spent, not an overflow
        locked_by = (%(slots)s::text[])[a.n],
        locked_until = now() + make_interval(secs => least(
            coalesce((%(leases)s::jsonb ->> j.kind)::float8, %(lease)s::float8), %(cap)s::float8)),
        -- The claim's nonce with the slot's number (tick.queue.lost_tokens).
        claim_token = overlay(%(nonce)s::text
                              PLACING lpad(to_hex(a.n), 4, '0') FROM 33 FOR 4)::uuid,
        started_at = statement_timestamp(),
        updated_at = now()
    FROM allowed AS a
    WHERE j.id = a.id
    RETURNING j.id, j.kind, j.payload::text AS payload, j.attempts, j.max_attempts,
        j.claim_token::text AS token, j.locked_by,
        extract(epoch FROM j.locked_until - now())::float8 AS lease_s,
        coalesce(extract(epoch FROM now() - CASE WHEN isfinite(j.run_at) THEN j.run_at END)
                 ::float8, 0) AS wait_s,
        j.checkpoint::text AS checkpoint,
        -- SPEC §21: the lane, the stored trace context, and whether a run came before.
        j.queue, j.trace_context::text AS trace, j.trace_context IS NOT NULL
            AND (j.attempts > 1 OR j.continues > 0 OR j.errors <> '[]') AS rerun,
        j.timeout_secs AS timeout_s  -- SPEC §26: its own timeout, or null
)
-- The claimed jobs, then one row (id null) as claim_keyed_jobs.sql's last:
-- the next key cursors (the served priority's key moved to the last head;
-- null: keep them), no per-key limit's held_back, whether a keyed job was
-- ready (`fair`), whether it came back short with ready jobs left (`more`:
-- another claimer holds a head, or this form did not hold), and whether
-- this form held (`dense`).
SELECT id, kind, payload, attempts, max_attempts, token, locked_by, lease_s, wait_s, checkpoint,
       queue, trace, rerun, timeout_s, NULL::text AS key_mark, NULL::boolean AS held_back,
       NULL::boolean AS fair, NULL::boolean AS more, NULL::boolean AS dense
FROM claimed
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       CASE WHEN h.go THEN (p.cursors || jsonb_build_object((SELECT p FROM top)::text, h.last))::text
       END,
       false, p.go,
       p.go AND (NOT h.go OR (SELECT count(*) FROM claimed) < p.want), p.go AND h.go
FROM plan AS p, held AS h
WHERE set_config('awc.keyed_claimed',
                 CASE WHEN p.go THEN (SELECT count(*) FROM claimed) ELSE -1 END::text, true)
      IS NOT NULL
  AND set_config('awc.claimed', ((SELECT lane_claimed FROM limited)
                                 + (SELECT count(*) FROM claimed))::text, true) IS NOT NULL
