-- The fair claim (SPEC §23, docs/decisions/0034), between the limits' step 2
-- and the plain walk: when a job with a key is ready and no global limit may
-- bind (SPEC §18: step 2 claimed nothing and left `awc.walk`), this is the
-- claim. Among ready jobs of one priority it takes them round-robin across
-- keys: every key's first job, then every key's second, and so on; a higher
-- priority still comes first. Jobs without a key are one key, ''.
--
-- The keys are found by a skip scan of jobs_ready_key_idx, ((-priority),
-- coalesce(key, ''), run_at, id): one probe per key, however many jobs each
-- holds, starting after this claimer's key cursor of that priority
-- (%(key_after)s, a JSON object of them) and wrapping around within it, so
-- the keys late in sort order are not left behind when there are more keys
-- than slots. The walk stops at as
-- many keys with ready jobs as there are slots, and reads from each at most
-- what round-robin could give it (slots - keys + 1): its cost is bounded by
-- the slots, never by a backlog. The candidates are read without locks; a
-- per-key limit (SPEC §23: `key` or `kind_key` rows, held by step 1) keeps
-- a key's candidates past its room out; the chosen jobs are then locked by
-- id (SKIP LOCKED: one another claimer took meanwhile is not replaced).
--
-- When no keyed job is ready (one probe of jobs_keyed_idx) this reads
-- nothing and leaves `awc.keyed_claimed` at -1: the plain walk claims as it
-- did before keys existed. The last row (id null) carries the next key cursor.
WITH RECURSIVE limited AS MATERIALIZED (  -- SPEC §18: step 1 named them; step 2 said if this claims
    SELECT (SELECT coalesce(nullif(current_setting('awc.limited_kinds', true), ''), '{}'))::text[]
               AS kinds,
           (SELECT coalesce(nullif(current_setting('awc.limited_queues', true), ''), '{}'))::text[]
               AS queues,
           (SELECT coalesce(nullif(current_setting('awc.walk', true), ''), 'false'))::boolean
               AS walk,
           -- SPEC §23: whether any per-key limit exists, and those step 1 holds
           (SELECT coalesce(nullif(current_setting('awc.key_limited', true), ''), 'false'))::boolean
               AS keyed_limits,
           (SELECT coalesce(nullif(current_setting('awc.held_key_limits', true), ''), '{}'))::text[]
               AS held_keys,
           (SELECT coalesce(nullif(current_setting('awc.limited_claimed', true), ''), '0'))::int
               AS lane_claimed
), paused AS MATERIALIZED (
    -- SPEC §23: the kinds whose keyed jobs are paused (kind:K --per-key at
    -- max_running 0), read once a claim, only with a per-key limit; keys
    -- paused (key:NAME or key:* at 0) are awc.key_paused's. The walk passes
    -- what they cover by, so jobs they do not cover (no key, a key with its
    -- own limit, another kind) are reached however many paused keys sort
    -- before them.
    SELECT coalesce(array_agg(l.name), '{}') AS kinds
    FROM awc.limits AS l
    WHERE (SELECT keyed_limits FROM limited) AND l.max_running = 0 AND l.scope = 'kind_key'
), plan AS MATERIALIZED (
    SELECT (cardinality(l.kinds) + cardinality(l.queues) = 0 OR l.walk)
           AND EXISTS (SELECT 1 FROM ONLY awc.jobs AS j
                       WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.key IS NOT NULL AND j.run_at <= now())
               AS go,
           cardinality(%(slots)s::text[]) AS want,
           -- The key cursors, one per priority (SPEC §23): {"-p": key} for
           -- the priorities served, "*" for the others (a cursor of one
           -- key, from before they were kept by priority; none: '').
           coalesce(%(key_after)s::jsonb, '{}') AS cursors
    FROM limited AS l
), dense AS MATERIALIZED (
    -- Many keys with few ready jobs each (a tenant per customer, the usual
    -- shape): the keys' heads read in one pass of jobs_ready_key_idx from
    -- the cursor, not a probe per key. The pass reads at most four entries
    -- per slot and stops at a ready head for every slot; when it finds that
    -- many, they are what the walk below would find, in its order (the keys
    -- after the cursor, each key's first job, a key whose first job is not
    -- due passed by: its first job is its earliest), and the walk is not
    -- run. Only without a kind or queue filter or a per-key limit (a paused
    -- kind is a per-key limit's). Otherwise, or short, the walk decides.
    SELECT h.p, h.k, h.id AS head, row_number() OVER (ORDER BY h.k) AS i
    FROM plan, limited AS l, (
        SELECT -j.priority::int AS p FROM ONLY awc.jobs AS j
        WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.run_at <= now()
        ORDER BY -j.priority::int LIMIT 1) AS top, LATERAL (
        SELECT u.p, u.k, u.id
        FROM (SELECT DISTINCT ON (s.k) s.p, s.k, s.run_at, s.id
              FROM (SELECT -j.priority::int AS p, coalesce(j.key, '') AS k, j.run_at, j.id
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
    WHERE plan.go AND plan.want > 0 AND NOT l.keyed_limits
      AND %(kinds)s::text[] IS NULL AND %(queues)s::text[] IS NULL
      -- the last fair claim found a ready key for every slot (or this
      -- claimer has no answer yet): with fewer keys, the pass would read
      -- its four entries a slot for too few heads on every claim
      AND %(key_pass)s::boolean
), dense_go AS MATERIALIZED (
    SELECT count(*) = (SELECT want FROM plan) AS go FROM dense
), groups AS (
    -- (priority, key) groups with PENDING jobs, in the walk's order: within a
    -- priority the keys after the cursor (phase 0), then those up to it
    -- (phase 1). Each probe lands on the key's head, its first job in claim
    -- order, so `ready` (it has a job this claim may take now) is read from
    -- that entry; a probe more only when the claim filters kinds or queues
    -- and the head is not one of them. `r` counts the ready keys, `i` every
    -- key walked.
    SELECT e.p, e.k, e.phase, e.ready, e.ready::int AS r, 1 AS i, e.head, e.head_at, e.head_kind
    FROM plan, LATERAL (
        SELECT h.p, h.k, h.phase, h.id AS head, h.run_at AS head_at, h.kind AS head_kind, CASE
                   WHEN h.run_at <= now()
                        AND (%(kinds)s::text[] IS NULL OR h.kind = ANY (%(kinds)s::text[]))
                        AND (%(queues)s::text[] IS NULL OR h.queue = ANY (%(queues)s::text[]))
                        AND (h.k = '' OR h.kind <> ALL ((SELECT kinds FROM paused)::text[]))
                       THEN true
                   WHEN %(kinds)s::text[] IS NULL AND %(queues)s::text[] IS NULL
                        AND (h.k = '' OR cardinality((SELECT kinds FROM paused)) = 0) THEN false
                   ELSE EXISTS (
                       SELECT 1 FROM ONLY awc.jobs AS j
                       WHERE j.state = 'PENDING' AND j.waiting = 0 AND -j.priority::int = h.p
                         AND coalesce(j.key, '') = h.k AND j.run_at <= now()
                         AND (%(kinds)s::text[] IS NULL OR j.kind = ANY (%(kinds)s::text[]))
                         AND (%(queues)s::text[] IS NULL OR j.queue = ANY (%(queues)s::text[]))
                         -- a kind paused per key (kind:K --per-key at 0)
                         AND (h.k = '' OR j.kind <> ALL ((SELECT kinds FROM paused)::text[])))
               END AND NOT (h.k <> '' AND (SELECT keyed_limits FROM limited)
                   -- SPEC §23: a key paused by its own limit (key:NAME at
                   -- max_running 0), or without one while key:* is at 0,
                   -- has nothing to give: the walk passes it by (probes of
                   -- the limits; no kind: a kind's pause is per job, above)
                   AND awc.key_paused(h.k, NULL)) AS ready
        FROM (SELECT e.p, e.k, e.phase, e.run_at, e.kind, e.queue, e.id
              FROM (SELECT -j.priority::int AS p FROM ONLY awc.jobs AS j
                    WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.run_at <= now()
                    ORDER BY -j.priority::int LIMIT 1) AS top, LATERAL (
                  (SELECT -j.priority::int AS p, coalesce(j.key, '') AS k, 0 AS phase,
                          j.run_at, j.kind, j.queue, j.id
                   FROM ONLY awc.jobs AS j
                   WHERE j.state = 'PENDING' AND j.waiting = 0
                     AND -j.priority::int = top.p
                     AND coalesce(j.key, '') > coalesce(plan.cursors ->> top.p::text,
                                                        plan.cursors ->> '*', '')
                   ORDER BY -j.priority::int, coalesce(j.key, ''), j.run_at, j.id LIMIT 1)
                  UNION ALL
                  (SELECT -j.priority::int, coalesce(j.key, ''), 1, j.run_at, j.kind, j.queue, j.id
                   FROM ONLY awc.jobs AS j
                   WHERE j.state = 'PENDING' AND j.waiting = 0
                     AND -j.priority::int = top.p
                   ORDER BY -j.priority::int, coalesce(j.key, ''), j.run_at, j.id LIMIT 1)
                  LIMIT 1) AS e) AS h
        OFFSET 0) AS e  -- not flattened: `ready` is worked out once per key
    WHERE plan.go AND plan.want > 0 AND NOT (SELECT go FROM dense_go)
    UNION ALL
    SELECT n.p, n.k, n.phase, n.ready, g.r + n.ready::int, g.i + 1, n.head, n.head_at,
           n.head_kind
    FROM groups AS g, plan, LATERAL (
        SELECT h.p, h.k, h.phase, h.id AS head, h.run_at AS head_at, h.kind AS head_kind, CASE
                   WHEN h.run_at <= now()
                        AND (%(kinds)s::text[] IS NULL OR h.kind = ANY (%(kinds)s::text[]))
                        AND (%(queues)s::text[] IS NULL OR h.queue = ANY (%(queues)s::text[]))
                        AND (h.k = '' OR h.kind <> ALL ((SELECT kinds FROM paused)::text[]))
                       THEN true
                   WHEN %(kinds)s::text[] IS NULL AND %(queues)s::text[] IS NULL
                        AND (h.k = '' OR cardinality((SELECT kinds FROM paused)) = 0) THEN false
                   ELSE EXISTS (
                       SELECT 1 FROM ONLY awc.jobs AS j
                       WHERE j.state = 'PENDING' AND j.waiting = 0 AND -j.priority::int = h.p
                         AND coalesce(j.key, '') = h.k AND j.run_at <= now()
                         AND (%(kinds)s::text[] IS NULL OR j.kind = ANY (%(kinds)s::text[]))
                         AND (%(queues)s::text[] IS NULL OR j.queue = ANY (%(queues)s::text[]))
                         -- a kind paused per key (kind:K --per-key at 0)
                         AND (h.k = '' OR j.kind <> ALL ((SELECT kinds FROM paused)::text[])))
               END AND NOT (h.k <> '' AND (SELECT keyed_limits FROM limited)
                   -- SPEC §23: a key paused by its own limit (key:NAME at
                   -- max_running 0), or without one while key:* is at 0,
                   -- has nothing to give: the walk passes it by (probes of
                   -- the limits; no kind: a kind's pause is per job, above)
                   AND awc.key_paused(h.k, NULL)) AS ready
        FROM (
            -- The next key of this priority, in the same phase. Each of the
            -- four runs only when its test of the last key holds (PostgreSQL
            -- tests it once, before the scan), so that the bounds of the one
            -- that runs are all the index's: in phase 1 the cursor bounds the
            -- keys from above (as a filter, a probe past the last key would
            -- read every entry after the cursor), and after a key with no job
            -- due now the probe passes the keys whose jobs are all due later
            -- (a tenant's job scheduled for tomorrow, many tenants over)
            -- inside the index, by run_at, not a probe and a heap visit each.
            -- After a ready key it lands on the next key's head, one probe:
            -- a test of run_at in the index costs every probe a third more.
            (SELECT -j.priority::int AS p, coalesce(j.key, '') AS k, g.phase AS phase,
                    j.run_at, j.kind, j.queue, j.id
             FROM ONLY awc.jobs AS j
             WHERE g.phase = 0 AND g.ready IS TRUE
               AND j.state = 'PENDING' AND j.waiting = 0 AND -j.priority::int = g.p
               AND coalesce(j.key, '') > g.k
             ORDER BY -j.priority::int, coalesce(j.key, ''), j.run_at, j.id LIMIT 1)
            UNION ALL
            (SELECT -j.priority::int AS p, coalesce(j.key, '') AS k, g.phase AS phase,
                    j.run_at, j.kind, j.queue, j.id
             FROM ONLY awc.jobs AS j
             WHERE g.phase = 0 AND g.ready IS NOT TRUE
               AND j.state = 'PENDING' AND j.waiting = 0 AND -j.priority::int = g.p
               AND coalesce(j.key, '') > g.k AND j.run_at <= now()
               AND (%(kinds)s::text[] IS NULL OR j.kind = ANY (%(kinds)s::text[]))
               AND (%(queues)s::text[] IS NULL OR j.queue = ANY (%(queues)s::text[]))
             ORDER BY -j.priority::int, coalesce(j.key, ''), j.run_at, j.id LIMIT 1)
            UNION ALL
            (SELECT -j.priority::int AS p, coalesce(j.key, '') AS k, g.phase AS phase,
                    j.run_at, j.kind, j.queue, j.id
             FROM ONLY awc.jobs AS j
             WHERE g.phase = 1 AND g.ready IS TRUE
               AND j.state = 'PENDING' AND j.waiting = 0 AND -j.priority::int = g.p
               AND coalesce(j.key, '') > g.k
               AND coalesce(j.key, '') <= coalesce(plan.cursors ->> g.p::text,
                                                   plan.cursors ->> '*', '')
             ORDER BY -j.priority::int, coalesce(j.key, ''), j.run_at, j.id LIMIT 1)
            UNION ALL
            (SELECT -j.priority::int AS p, coalesce(j.key, '') AS k, g.phase AS phase,
                    j.run_at, j.kind, j.queue, j.id
             FROM ONLY awc.jobs AS j
             WHERE g.phase = 1 AND g.ready IS NOT TRUE
               AND j.state = 'PENDING' AND j.waiting = 0 AND -j.priority::int = g.p
               AND coalesce(j.key, '') > g.k
               AND coalesce(j.key, '') <= coalesce(plan.cursors ->> g.p::text,
                                                   plan.cursors ->> '*', '')
               AND j.run_at <= now()
               AND (%(kinds)s::text[] IS NULL OR j.kind = ANY (%(kinds)s::text[]))
               AND (%(queues)s::text[] IS NULL OR j.queue = ANY (%(queues)s::text[]))
             ORDER BY -j.priority::int, coalesce(j.key, ''), j.run_at, j.id LIMIT 1)
            UNION ALL
            -- Past the last key: wrap to the first, unless the cursor is before it.
            (SELECT -j.priority::int, coalesce(j.key, ''), 1, j.run_at, j.kind, j.queue, j.id
             FROM ONLY awc.jobs AS j
             WHERE j.state = 'PENDING' AND j.waiting = 0
               AND -j.priority::int = g.p AND g.phase = 0
               AND coalesce(j.key, '') <= coalesce(plan.cursors ->> g.p::text,
                                                   plan.cursors ->> '*', '')
             ORDER BY -j.priority::int, coalesce(j.key, ''), j.run_at, j.id LIMIT 1)
            UNION ALL
            -- Past this priority's keys: the next priority, from the cursor.
            (SELECT e.p, e.k, e.phase, e.run_at, e.kind, e.queue, e.id
             FROM (SELECT -j.priority::int AS p FROM ONLY awc.jobs AS j
                   WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.run_at <= now()
                     AND -j.priority::int > g.p
                   ORDER BY -j.priority::int LIMIT 1) AS nxt, LATERAL (
                 (SELECT -j.priority::int AS p, coalesce(j.key, '') AS k, 0 AS phase,
                         j.run_at, j.kind, j.queue, j.id
                  FROM ONLY awc.jobs AS j
                  WHERE j.state = 'PENDING' AND j.waiting = 0
                    AND -j.priority::int = nxt.p
                    AND coalesce(j.key, '') > coalesce(plan.cursors ->> nxt.p::text,
                                                       plan.cursors ->> '*', '')
                  ORDER BY -j.priority::int, coalesce(j.key, ''), j.run_at, j.id LIMIT 1)
                 UNION ALL
                 (SELECT -j.priority::int, coalesce(j.key, ''), 1, j.run_at, j.kind, j.queue, j.id
                  FROM ONLY awc.jobs AS j
                  WHERE j.state = 'PENDING' AND j.waiting = 0
                    AND -j.priority::int = nxt.p
                  ORDER BY -j.priority::int, coalesce(j.key, ''), j.run_at, j.id LIMIT 1)
                 LIMIT 1) AS e)
            LIMIT 1) AS h
        OFFSET 0) AS n
    WHERE g.r < plan.want
), quick AS MATERIALIZED (
    -- The usual case, worked out without the choosing below: no kind or
    -- queue filter, no per-key limit, and the walk found a ready key for
    -- every slot within one priority. Round-robin then gives each of those
    -- keys its head, the job the walk already read, in the walk's order,
    -- which is what `found`, `seen` and `ordered` would rank first; those
    -- windows and sorts (0.2 of 2.2 ms a claim of 64 over 10,000 keys,
    -- decision 0034) are not run.
    SELECT %(kinds)s::text[] IS NULL AND %(queues)s::text[] IS NULL
           AND NOT (SELECT keyed_limits FROM limited)
           AND coalesce((SELECT count(*) >= (SELECT want FROM plan) AND min(g.p) = max(g.p)
                         FROM groups AS g WHERE g.ready), false) AS go
), found AS MATERIALIZED (
    -- The keys with ready jobs, numbered in the walk's order; `cap`, what
    -- round-robin could give each (see `seen`).
    SELECT f.*, greatest((SELECT want FROM plan) - f.keys + 1, 1) AS cap
    FROM (SELECT g.p, g.k, row_number() OVER (ORDER BY g.i) AS n,
                 count(*) OVER (PARTITION BY g.p) AS keys, g.head, g.head_at, g.head_kind
          FROM groups AS g
          WHERE g.ready) AS f
), seen AS MATERIALIZED (
    -- Each key's first ready jobs, unlocked: no more than round-robin could
    -- give it among its priority's keys (one each, the rest to one key).
    -- One each (as many keys as slots) and no filter: the head the walk of
    -- keys found is that one, and nothing is read again; else each key's
    -- range is read from its head.
    SELECT f.p, f.k, f.n, c.id, c.kind,
           row_number() OVER (PARTITION BY f.n ORDER BY c.run_at, c.id) AS r,
           count(*) OVER (PARTITION BY f.n) = f.cap AS capped  -- it may hold more
    FROM found AS f, plan, LATERAL (
        SELECT f.head AS id, f.head_kind AS kind, f.head_at AS run_at
        WHERE f.keys >= plan.want AND %(kinds)s::text[] IS NULL AND %(queues)s::text[] IS NULL
          AND cardinality((SELECT kinds FROM paused)) = 0
        UNION ALL
        (SELECT j.id, j.kind, j.run_at
         FROM ONLY awc.jobs AS j
         WHERE j.state = 'PENDING' AND j.waiting = 0 AND -j.priority::int = f.p
           AND coalesce(j.key, '') = f.k AND j.run_at <= now()
           -- from the head the walk found: no entry before it is a ready
           -- job in this snapshot (under a pinned horizon, a claimed job's)
           AND (j.run_at, j.id) >= (f.head_at, f.head)
           AND (%(kinds)s::text[] IS NULL OR j.kind = ANY (%(kinds)s::text[]))
           AND (%(queues)s::text[] IS NULL OR j.queue = ANY (%(queues)s::text[]))
           AND (f.k = '' OR j.kind <> ALL ((SELECT kinds FROM paused)::text[]))
           AND NOT (f.keys >= plan.want AND %(kinds)s::text[] IS NULL
                    AND %(queues)s::text[] IS NULL
                    AND cardinality((SELECT kinds FROM paused)) = 0)
         ORDER BY -j.priority::int, coalesce(j.key, ''), j.run_at, j.id
         LIMIT f.cap)) AS c
), ordered AS MATERIALIZED (
    -- Round-robin: priority first, then each key's first job, then each
    -- key's second, in the walk's order of keys.
    SELECT s.*, row_number() OVER (ORDER BY s.p, s.r, s.n) AS o FROM seen AS s
), bound AS MATERIALIZED (
    -- Per-key limits (SPEC §23): each candidate with a key under a `key`
    -- limit (its own, or '*') or a `kind_key` limit (its kind's), ranked in
    -- claim order among that limit's candidates of the same key.
    SELECT o.id, l.scope, l.name, o.k, l.max_running, l.rate, l.per_secs,
           row_number() OVER (PARTITION BY l.scope, l.name, o.k ORDER BY o.o) AS rank
    FROM ordered AS o
    JOIN awc.limits AS l
      ON (l.scope = 'key' AND l.name = o.k) OR (l.scope = 'kind_key' AND l.name = o.kind)
         -- key:* for the keys that have no limit of their own (key:NAME replaces it)
         OR (l.scope = 'key' AND l.name = '*'
             AND NOT EXISTS (SELECT 1 FROM awc.limits AS own
                             WHERE own.scope = 'key' AND own.name = o.k))
    WHERE o.k <> '' AND (SELECT keyed_limits FROM limited)
), stamp AS MATERIALIZED (
    -- One instant, taken under step 1's locks: the claims a per-key rate
    -- logs, and the end of every window counted (as claim_limited_jobs).
    SELECT clock_timestamp() AS at
), key_room AS MATERIALIZED (
    -- Each (limit, key)'s room: max_running less the key's RUNNING jobs with
    -- unexpired leases (counted up to max_running), rate less the key's
    -- claims in the last per_secs; 0 unless step 1 holds the limit's row,
    -- so a count is never raced (SPEC §18's discipline).
    SELECT b.scope, b.name, b.k, b.rate, b.per_secs,
           CASE WHEN b.scope || ':' || b.name <> ALL (l.held_keys) THEN 0
                ELSE least(coalesce(b.max_running - (
                    SELECT count(*) FROM (
                        SELECT 1 FROM ONLY awc.jobs AS r
                        WHERE r.state = 'RUNNING' AND r.key = b.k
                          AND (b.scope = 'key' OR r.kind = b.name)
                          AND r.locked_until > s.at
                        LIMIT coalesce(b.max_running, 0)) AS running), 2147483647),
                    coalesce(b.rate - (
                        SELECT count(*) FROM awc.limit_claims AS c
                        WHERE c.scope = b.scope AND c.name = b.name AND c.key = b.k
                          AND c.at > s.at - make_interval(secs => b.per_secs)), 2147483647))
           END AS room
    FROM (SELECT DISTINCT scope, name, k, max_running, rate, per_secs FROM bound) AS b,
         limited AS l, stamp AS s
), chosen AS MATERIALIZED (
    -- As many as there are slots, in round-robin order, past those a
    -- per-key limit holds back; in the usual case (`quick`) the heads the
    -- walk found. Each branch runs only when its test holds (`quick`,
    -- worked out once before either), so `ordered` is not worked out in the
    -- usual case.
    SELECT d.head AS id, d.p, d.k, d.i AS n
    FROM dense AS d
    WHERE (SELECT go FROM dense_go)
    UNION ALL
    SELECT g.head AS id, g.p, g.k, g.i AS n
    FROM groups AS g
    WHERE (SELECT go FROM quick) AND g.ready
    UNION ALL
    (SELECT o.id, o.p, o.k, o.n
     FROM ordered AS o
     WHERE NOT (SELECT go FROM quick) AND NOT (SELECT go FROM dense_go)
       AND NOT EXISTS (SELECT 1 FROM bound AS b
                       JOIN key_room AS r ON r.scope = b.scope AND r.name = b.name AND r.k = b.k
                       WHERE b.id = o.id AND b.rank > r.room)
     ORDER BY o.o
     LIMIT (SELECT want FROM plan))
), locked AS MATERIALIZED (
    -- The chosen jobs themselves (SKIP LOCKED: one another claimer took is
    -- left, never replaced by a job no limit's room was counted for).
    SELECT j.id, -j.priority::int AS p, j.run_at
    FROM ONLY awc.jobs AS j
    WHERE j.id = ANY (ARRAY(SELECT id FROM chosen))
      AND j.state = 'PENDING' AND j.waiting = 0 AND j.run_at <= now()
    ORDER BY j.id
    FOR UPDATE OF j SKIP LOCKED
), allowed AS MATERIALIZED (
    SELECT l.id, row_number() OVER (ORDER BY l.p, l.run_at, l.id) AS n
    FROM locked AS l
), claimed AS (
    UPDATE ONLY awc.jobs AS j
    SET state = 'RUNNING',
        attempts = least(j.attempts, 2147483646) + 1,  -- int max: spent, not an overflow
        locked_by = (%(slots)s::text[])[a.n],
        locked_until = now() + make_interval(secs => least(
            coalesce((%(leases)s::jsonb ->> j.kind)::float8, %(lease)s::float8), %(cap)s::float8)),
        -- The claim's nonce with the slot's number (tick.queue.lost_tokens):
        -- a claim whose answer is lost is still known by its tokens.
        claim_token = overlay(%(nonce)s::text
                              PLACING lpad(to_hex(a.n), 4, '0') FROM 33 FOR 4)::uuid,
        started_at = (SELECT at FROM stamp),  -- the instant a per-key rate logs
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
), logged AS (  -- a per-key rate's claims, one row per job and key
    INSERT INTO awc.limit_claims (scope, name, key, at)
    SELECT b.scope, b.name, b.k, (SELECT at FROM stamp)
    FROM bound AS b
    JOIN claimed AS c ON c.id = b.id
    WHERE b.rate IS NOT NULL
), forgot AS (  -- and those out of every window now
    DELETE FROM awc.limit_claims AS c
    USING key_room AS r
    WHERE r.rate IS NOT NULL AND c.scope = r.scope AND c.name = r.name AND c.key = r.k
      AND c.at <= (SELECT at FROM stamp) - make_interval(secs => r.per_secs)
), held AS MATERIALIZED (
    -- Ready jobs a per-key limit held back (SPEC §18's held_back: the run
    -- claims again shortly rather than end drained); a limit of
    -- max_running 0 (a paused key) holds nothing back.
    SELECT EXISTS (SELECT 1 FROM bound AS b
                   JOIN key_room AS r ON r.scope = b.scope AND r.name = b.name AND r.k = b.k
                   WHERE b.rank > r.room AND b.max_running IS DISTINCT FROM 0) AS held_back
), turn AS MATERIALIZED (
    -- The next key cursors: the cursors given, with the last priority
    -- served set to the last key served there, so the next claim of that
    -- priority starts with the key after it; when none was served (a per-key
    -- limit held every key walked), past the keys walked, so the next claim
    -- reaches the keys after them. The last priority: every key of a
    -- priority above it was served (a priority is taken whole before the
    -- next), and the rotation matters where the slots ran out; the cursors
    -- of the others stay. (One cursor for all priorities was the last key
    -- served: one key's trickle of higher-priority jobs set it every claim,
    -- and the claims of the priority below served the key after it, only
    -- it.) At most 64 priorities are kept, the most recently served (`~`
    -- lists them, the latest first), so a producer inventing priorities
    -- cannot grow them, and a busy priority's place in its rotation is
    -- never the one dropped. (Past 64 all but the default were dropped
    -- once: a producer cycling 100 priorities reset priority 0's rotation
    -- every few claims, and 62 of its 200 tenants were never served.)
    -- Served again at the priority served last (the usual case), only its
    -- key changes. (`found` is read only when nothing was chosen: the first
    -- branch that gives a row ends the union.)
    SELECT CASE WHEN p.cursors -> '~' ->> 0 = t.p::text
                    THEN p.cursors || jsonb_build_object(t.p::text, t.k)
                ELSE awc.key_turn(p.cursors, t.p, t.k)  -- the same, and "~" kept
           END AS k
    FROM plan AS p, (
        (SELECT c.p, c.k FROM chosen AS c ORDER BY c.p DESC, c.n DESC LIMIT 1)
        UNION ALL
        (SELECT f.p, f.k FROM found AS f ORDER BY f.p DESC, f.n DESC LIMIT 1)
        LIMIT 1) AS t
), more AS MATERIALIZED (
    -- Short (fewer jobs than slots), but not because the ready keyed jobs ran
    -- out: another claimer took or holds a chosen job (SKIP LOCKED), or a
    -- per-key limit kept a key's candidates out while a key served may hold
    -- more than its cap let this claim read. The run claims again rather
    -- than end drained (SPEC §6).
    SELECT (SELECT count(*) FROM claimed) < (SELECT want FROM plan)
           AND ((SELECT count(*) FROM locked) < (SELECT count(*) FROM chosen)
                OR ((SELECT count(*) FROM ordered) > (SELECT count(*) FROM chosen)
                    AND EXISTS (SELECT 1 FROM seen AS s
                                WHERE s.capped AND s.id IN (SELECT id FROM chosen)))) AS more
)
-- The claimed jobs, then one row (id null) with the next key cursor (null:
-- keep the cursor), whether a per-key limit held ready jobs back (added to
-- step 2's answer, in `awc.held_back` too), whether this step was the claim
-- (`fair`: a keyed job was ready), whether it came back short with ready
-- jobs left (`more`) and whether the one-pass read held (`dense`: the next
-- claim may be claim_dense_jobs.sql; null: fewer ready keys than slots,
-- and the next fair claim skips that read, `key_pass`). How many this step
-- claimed (-1: it did not claim) goes to the plain walk after it, which
-- then claims nothing; the transaction's count to the history statement
-- (`awc.claimed`, as the walk leaves it): the engine sends no walk after a
-- fair claim when the last claim was one too.
SELECT id, kind, payload, attempts, max_attempts, token, locked_by, lease_s, wait_s, checkpoint,
       queue, trace, rerun, timeout_s, NULL::text AS key_mark, NULL::boolean AS held_back,
       NULL::boolean AS fair, NULL::boolean AS more, NULL::boolean AS dense
FROM claimed
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       (SELECT k::text FROM turn), h.held_back, p.go, p.go AND (SELECT more FROM more),
       CASE WHEN (SELECT go FROM dense_go) THEN true
            WHEN (SELECT count(*) >= p.want FROM groups AS g WHERE g.ready) THEN false END
FROM plan AS p, held AS h
WHERE set_config('awc.keyed_claimed',
                 CASE WHEN p.go THEN (SELECT count(*) FROM claimed) ELSE -1 END::text, true)
      IS NOT NULL
  AND set_config('awc.claimed', ((SELECT lane_claimed FROM limited)
                                 + (SELECT count(*) FROM claimed))::text, true) IS NOT NULL
  AND (NOT h.held_back OR set_config('awc.held_back', 'true', true) IS NOT NULL)
