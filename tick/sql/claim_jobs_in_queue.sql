-- Claim a batch of ready jobs of one queue, %(queue)s: claim_jobs.sql's
-- statement walking jobs_ready_queue_idx, (queue, -priority, run_at, id), from
-- the cursor within the queue (no sort, however deep the other queues are).
-- The rest, and what each part is for, as in claim_jobs.sql.
WITH limited AS MATERIALIZED (  -- SPEC §18: step 1 named them; step 2 said if this claims
    SELECT (SELECT coalesce(nullif(current_setting('awc.limited_kinds', true), ''), '{}'))::text[]
               AS kinds,
           (SELECT coalesce(nullif(current_setting('awc.limited_queues', true), ''), '{}'))::text[]
               AS queues,
           (SELECT coalesce(nullif(current_setting('awc.limited_claimed', true), ''), '0'))::int
               AS claimed,
           (SELECT coalesce(nullif(current_setting('awc.walk', true), ''), 'false'))::boolean
               AS walk,
           -- SPEC §23: the fair claim before this one claimed (-1: it did not)
           (SELECT coalesce(nullif(current_setting('awc.keyed_claimed', true), ''), '-1'))::int
               AS keyed,
           -- SPEC §23: a keyed job under a per-key limit is the fair claim's
           -- alone (one made ready since its snapshot waits for the next claim)
           (SELECT coalesce(nullif(current_setting('awc.key_limited', true), ''), 'false'))::boolean
               AS keyed_limits
), plan AS MATERIALIZED (
    SELECT (SELECT (cardinality(kinds) + cardinality(queues) = 0 OR walk) AND keyed < 0
            FROM limited) AS go,
           (SELECT keyed_limits FROM limited) AS keyed_limits,
           (SELECT claimed + greatest(keyed, 0) FROM limited) AS claimed,
           cardinality(%(slots)s::text[]) - (SELECT claimed + greatest(keyed, 0) FROM limited)
               AS want,
           pg_current_snapshot() AS snap,
           pg_current_xact_id_if_assigned() AS own  -- null before this transaction wrote
), spans AS MATERIALIZED (
    -- The transactions begun since the last snapshot that this one sees ended:
    -- the ranges between the ones still running, so none of their entries is read.
    SELECT b.lo, b.hi
    FROM (SELECT x AS lo, lead(x) OVER (ORDER BY x) AS hi
          FROM (SELECT (%(xmax)s::text::numeric - 1)::text::xid8 AS x
                UNION ALL
                SELECT x FROM plan, pg_snapshot_xip(plan.snap) AS x WHERE x >= %(xmax)s::text::xid8
                UNION ALL
                SELECT pg_snapshot_xmax(snap) FROM plan) AS cut) AS b
    WHERE b.hi > b.lo
), late AS MATERIALIZED (  -- made ready behind the cursor since the last claim
    SELECT l.id, l.p, l.run_at, l.run_at <= now() AS due
    FROM (
        SELECT j.id, -j.priority::int AS p, j.run_at, j.kind, j.queue
        FROM plan, unnest(%(xip)s::text[]::xid8[]) AS x, LATERAL (
            -- Ordered by ready_xid: only jobs_ready_xid_idx answers without a
            -- sort (the pin forbids one), never a walk of the ready index.
            SELECT * FROM ONLY awc.jobs AS j WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.ready_xid = x
            ORDER BY j.ready_xid) AS j
        WHERE pg_visible_in_snapshot(x, plan.snap)
        UNION ALL
        SELECT j.id, -j.priority::int, j.run_at, j.kind, j.queue
        FROM spans AS s, LATERAL (
            SELECT * FROM ONLY awc.jobs AS j
            WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.ready_xid > s.lo AND j.ready_xid < s.hi
            ORDER BY j.ready_xid) AS j
        UNION ALL
        -- And this transaction's own, which no snapshot lists: the children
        -- its outcomes made ready, the jobs it retried. One that sorts before
        -- the cursor (a callback of higher priority than its parents) was
        -- left to the next claim, which a one-shot tick that drained here
        -- never made (SPEC §20: the child is claimable in that transaction).
        SELECT j.id, -j.priority::int, j.run_at, j.kind, j.queue
        FROM plan, LATERAL (
            SELECT * FROM ONLY awc.jobs AS j
            -- a range, not `=`: ordered by ready_xid, only jobs_ready_xid_idx
            -- answers without a sort (by `=` a plan took the key index and
            -- walked every job behind the cursor)
            WHERE j.state = 'PENDING' AND j.waiting = 0
              AND j.ready_xid >= plan.own AND j.ready_xid <= plan.own
            ORDER BY j.ready_xid) AS j
    ) AS l, plan
    WHERE (l.p, l.run_at, l.id)
          <= (%(after_p)s::int, %(after_r)s::timestamptz, %(after_i)s::bigint)
      AND (%(kinds)s::text[] IS NULL OR l.kind = ANY (%(kinds)s::text[]))
      AND (%(queues)s::text[] IS NULL OR l.queue = ANY (%(queues)s::text[]))
), taken_late AS MATERIALIZED (
    -- By primary key (in its order, so no planner walks the ready index for
    -- them): they come before every job past the cursor.
    SELECT j.id, -j.priority::int AS p, j.run_at
    FROM ONLY awc.jobs AS j
    WHERE j.id = ANY (ARRAY(SELECT id FROM late WHERE due))
      AND j.state = 'PENDING' AND j.waiting = 0 AND j.run_at <= now() AND (SELECT go FROM plan)
      AND (j.key IS NULL OR NOT (SELECT keyed_limits FROM plan))
    ORDER BY j.id
    LIMIT (SELECT want FROM plan)
    FOR UPDATE OF j SKIP LOCKED
), taken_next AS MATERIALIZED (
    SELECT j.id, -j.priority::int AS p, j.run_at
    FROM ONLY awc.jobs AS j
    WHERE j.state = 'PENDING' AND j.waiting = 0
      AND j.queue = %(queue)s
      AND (j.queue, -j.priority::int, j.run_at, j.id)
          > (%(queue)s, %(after_p)s::int, %(after_r)s::timestamptz, %(after_i)s::bigint)
      AND j.run_at <= now()
      AND (%(kinds)s::text[] IS NULL OR j.kind = ANY (%(kinds)s::text[]))
      AND (%(queues)s::text[] IS NULL OR j.queue = ANY (%(queues)s::text[]))
      -- A limit that may bind: step 2 claimed, in priority order, by lane.
      AND (SELECT go FROM plan)
      AND (j.key IS NULL OR NOT (SELECT keyed_limits FROM plan))
    ORDER BY j.queue, -j.priority::int, j.run_at, j.id
    LIMIT (SELECT want FROM plan) - (SELECT count(*) FROM taken_late)
    FOR UPDATE OF j SKIP LOCKED
), ready AS MATERIALIZED (
    SELECT t.id, t.p, t.run_at, row_number() OVER (ORDER BY t.p, t.run_at, t.id) AS n
    FROM (SELECT * FROM taken_late UNION ALL SELECT * FROM taken_next) AS t
), claimed AS (
    UPDATE ONLY awc.jobs AS j
    SET state = 'RUNNING',
        attempts = least(j.attempts, 2147483646) + 1,  -- int max: spent, not an overflow
        locked_by = (%(slots)s::text[])[ready.n + (SELECT claimed FROM plan)],
        locked_until = now() + make_interval(secs => least(
            coalesce((%(leases)s::jsonb ->> j.kind)::float8, %(lease)s::float8), %(cap)s::float8)),
        -- The claim's nonce with the slot's number (tick.queue.lost_tokens):
        -- a claim whose answer is lost is still known by its tokens.
        claim_token = overlay(%(nonce)s::text
                              PLACING lpad(to_hex(ready.n + (SELECT claimed FROM plan)), 4, '0')
                              FROM 33 FOR 4)::uuid,
        -- the claim's own start, not its transaction's: the outcomes sent
        -- before it in the exchange (a fan-out's release) took their time,
        -- and a child made ready by a parent completed meanwhile showed a
        -- start before that parent's end
        started_at = statement_timestamp(),
        updated_at = now()
    FROM ready
    WHERE j.id = ready.id
    RETURNING j.id, j.kind, j.payload::text AS payload, j.attempts, j.max_attempts,
        j.claim_token::text AS token, j.locked_by,
        extract(epoch FROM j.locked_until - now())::float8 AS lease_s,
        -- An infinite run_at (-infinity: ready since always) has no measurable wait;
        -- subtracting it would fail the whole claim (SPEC §4.2).
        coalesce(extract(epoch FROM now() - CASE WHEN isfinite(j.run_at) THEN j.run_at END)
                 ::float8, 0) AS wait_s,
        -- What an earlier claim's last checkpoint saved (SPEC §17): ctx.saved.
        j.checkpoint::text AS checkpoint,
        -- SPEC §21: the lane, the stored trace context, and whether a run came before.
        j.queue, j.trace_context::text AS trace, j.trace_context IS NOT NULL
            AND (j.attempts > 1 OR j.continues > 0 OR j.errors <> '[]') AS rerun,
        j.timeout_secs AS timeout_s  -- SPEC §26: its own timeout, or null
), left_ready AS MATERIALIZED (
    -- The first job ready now that this claim did not take: the next cursor
    -- stops before it (another claimer holds it, or there was no slot left).
    SELECT f.p, f.run_at, f.id FROM (
        (SELECT -j.priority::int AS p, j.run_at, j.id
         FROM ONLY awc.jobs AS j
         WHERE j.state = 'PENDING' AND j.waiting = 0
           AND j.queue = %(queue)s
           AND (j.queue, -j.priority::int, j.run_at, j.id)
               > (%(queue)s, %(after_p)s::int, %(after_r)s::timestamptz, %(after_i)s::bigint)
           AND j.run_at <= now()
           AND (%(kinds)s::text[] IS NULL OR j.kind = ANY (%(kinds)s::text[]))
           AND (%(queues)s::text[] IS NULL OR j.queue = ANY (%(queues)s::text[]))
           AND j.id <> ALL (ARRAY(SELECT id FROM ready))
         ORDER BY j.queue, -j.priority::int, j.run_at, j.id
         LIMIT 1)
        UNION ALL
        SELECT l.p, l.run_at, l.id FROM late AS l
        WHERE l.due AND l.id <> ALL (ARRAY(SELECT id FROM ready))) AS f
    ORDER BY 1, 2, 3
    LIMIT 1
), mark AS MATERIALIZED (
    -- The next cursor: before the first job left ready, else past the last
    -- one taken, else where it was.
    SELECT m.p, m.run_at, m.id
    -- Just before a key is one id less; before the least id a bigint
    -- holds (a row of plain SQL: `id - 1` failed every claim), the last key
    -- of the priority above, which no job due can hold.
    FROM (SELECT 1 AS rank, b.p, b.run_at, b.id FROM left_ready AS l, LATERAL (
              SELECT l.p, l.run_at, l.id - 1 AS id WHERE l.id > -9223372036854775808
              UNION ALL
              SELECT l.p - 1, 'infinity'::timestamptz, 9223372036854775807
              WHERE l.id = -9223372036854775808) AS b
          UNION ALL
          (SELECT 2, p, run_at, id FROM taken_next ORDER BY 2 DESC, 3 DESC, 4 DESC LIMIT 1)
          UNION ALL
          SELECT 3, %(after_p)s::int, %(after_r)s::timestamptz, %(after_i)s::bigint) AS m
    ORDER BY m.rank
    LIMIT 1
), passed AS MATERIALIZED (
    -- Jobs due later that the next cursor passes over: the claimer rewinds
    -- to the first of them when the earliest is due.
    SELECT l.p, l.run_at, l.id FROM late AS l WHERE NOT l.due
    UNION ALL
    SELECT -j.priority::int, j.run_at, j.id
    FROM mark AS m, LATERAL (
        SELECT * FROM ONLY awc.jobs AS j
        WHERE j.state = 'PENDING' AND j.waiting = 0
          AND (j.queue, -j.priority::int, j.run_at, j.id)
              > (%(queue)s, %(after_p)s::int, %(after_r)s::timestamptz, %(after_i)s::bigint)
          AND (j.queue, -j.priority::int, j.run_at, j.id) < (%(queue)s, m.p, m.run_at, m.id)
          AND j.run_at > now()
          AND (%(kinds)s::text[] IS NULL OR j.kind = ANY (%(kinds)s::text[]))
          AND (%(queues)s::text[] IS NULL OR j.queue = ANY (%(queues)s::text[]))
        -- In the walk's order, which only the ready index it walks gives (the
        -- pin forbids a sort): bounded there by both cursors. Every ready
        -- index has the same predicate since SPEC §20's `waiting = 0`, and
        -- unordered the planner took one led by another column (queue, lane,
        -- key), reading every ready job on each claim (tests/test_plans.py).
        ORDER BY j.queue, -j.priority::int, j.run_at, j.id) AS j
), rewind AS MATERIALIZED (
    SELECT b.p, b.run_at, b.id, (SELECT min(run_at) FROM passed) AS due
    FROM (SELECT * FROM passed ORDER BY 1, 2, 3 LIMIT 1) AS f, LATERAL (
        SELECT f.p, f.run_at, f.id - 1 AS id WHERE f.id > -9223372036854775808
        UNION ALL  -- as the mark's: just before the least id
        SELECT f.p - 1, 'infinity'::timestamptz, 9223372036854775807
        WHERE f.id = -9223372036854775808) AS b
)
SELECT id, kind, payload, attempts, max_attempts, token, locked_by, lease_s, wait_s, checkpoint,
       queue, trace, rerun, timeout_s, NULL::text AS mark
FROM claimed
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       json_build_object(
           -- Keys as [-priority, run_at as text, id, run_at in epoch seconds to order by].
           'after', json_build_array(m.p, m.run_at::text, m.id,
                                     extract(epoch FROM m.run_at)::float8),
           'rewind', CASE WHEN r.p IS NOT NULL THEN json_build_array(
               r.p, r.run_at::text, r.id, extract(epoch FROM r.run_at)::float8) END,
           -- Seconds until the earliest job passed over is due (capped: an
           -- infinite run_at is never due).
           'rewind_in', CASE WHEN r.due IS NOT NULL THEN least(greatest(
               coalesce(extract(epoch FROM r.due - now())::float8, 1e9), 0), 1e9) END,
           'xmax', pg_snapshot_xmax(p.snap)::text,
           'xip', ARRAY(SELECT x::text FROM pg_snapshot_xip(p.snap) AS x))::text
FROM mark AS m CROSS JOIN plan AS p LEFT JOIN rewind AS r ON true
-- How many jobs this transaction's claim took (step 2's and this one's), for
-- the history statement after it (SPEC §16): whether the run goes on.
WHERE set_config('awc.claimed', (p.claimed + (SELECT count(*) FROM claimed))::text, true)
      IS NOT NULL
