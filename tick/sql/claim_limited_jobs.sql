-- The limits of this claim (SPEC §18, docs/decisions/0012 and
-- 0018-claims-by-lane), step 2 of 3: when any limit exists, this is the
-- claim, of limited and unlimited jobs alike, in one priority order (SPEC §4:
-- higher priority runs first; a limit only holds jobs back).
--
-- Ready jobs are read by lane, a (kind, queue, priority) of their own
-- (jobs_ready_lane_idx: kind, queue, priority, key, run_at, id): the lanes
-- are found one index probe each, and the claim opens only those it may
-- draw from, each up to its cap (the slots, and the room of its kind's and
-- its queue's limits). A lane of a paused or saturated limit, or of one
-- another claimer holds, is never opened: its backlog, however deep, costs
-- the claim one probe. Within an open lane the jobs are taken round-robin
-- across keys (SPEC §23, decision 0034, amended 2026-12-06, late), as the fair
-- claim takes them across a priority: a walk of the lane's keys from this
-- claimer's key cursor, one probe each, at most the lane's cap and one
-- more. The candidates are read without locks, the first ones in claim
-- order (priority, then each key's first job, then each key's second) that
-- fit their limits' rooms are chosen, and only then each key of each lane
-- locks as many as were chosen from it (SKIP LOCKED: one another claimer
-- took meanwhile gives way to the key's next, which fits the same rooms),
-- so the claim locks no job it does not claim. The last row carries the
-- next key cursor.
--
-- Rooms: max_running less the RUNNING jobs with unexpired leases, rate less
-- the claims of the last per_secs. This statement's snapshot is newer than
-- step 1's locks, so the counts include every earlier holder's claims. The
-- claims are stamped with one clock_timestamp() taken under the locks, so a
-- window looking back sees every claim before it. A job whose kind and queue
-- are both limited needs both held and fits both rooms (counted
-- conservatively: never more, sometimes fewer). With no limit rows this reads
-- nothing and step 3 (the usual claim, one ordered walk) claims; so it does
-- when no limit can bind in this claim (the gate below).
WITH RECURSIVE stamp AS MATERIALIZED (
    SELECT clock_timestamp() AS at, s.held_kinds, s.held_queues, s.limited_kinds,
           s.limited_queues, s.keyed_limits, s.held_keys,
           cardinality(s.limited_kinds) + cardinality(s.limited_queues) > 0 AS limited
    FROM (SELECT
        (SELECT coalesce(nullif(current_setting('awc.held_kinds', true), ''), '{}'))::text[]
            AS held_kinds,
        (SELECT coalesce(nullif(current_setting('awc.held_queues', true), ''), '{}'))::text[]
            AS held_queues,
        (SELECT coalesce(nullif(current_setting('awc.limited_kinds', true), ''), '{}'))::text[]
            AS limited_kinds,
        (SELECT coalesce(nullif(current_setting('awc.limited_queues', true), ''), '{}'))::text[]
            AS limited_queues,
        -- SPEC §23: whether any per-key limit exists, and those step 1 holds
        (SELECT coalesce(nullif(current_setting('awc.key_limited', true), ''), 'false'))::boolean
            AS keyed_limits,
        (SELECT coalesce(nullif(current_setting('awc.held_key_limits', true), ''), '{}'))::text[]
            AS held_keys) AS s
), relevant AS MATERIALIZED (
    -- The limits this claim's filters reach whose kind or queue has PENDING
    -- jobs: one probe of its index each, the first value at or after the
    -- name in that index's order (jobs_ready_lane_idx for a kind,
    -- jobs_ready_queue_idx for a queue), which no other index can give. As
    -- "a job of this queue exists", a generic plan guessed every name
    -- alike where one queue held every job, and read a whole index for
    -- each limit on a queue with no job (the lane index by its second
    -- column, or the claim order's with a filter): ten limits on other
    -- kinds and queues cost a drain a fifth of its rate (PostgreSQL 15).
    SELECT l.scope, l.name, l.max_running, l.rate, l.per_secs
    FROM awc.limits AS l
    WHERE (l.scope = 'kind' AND (%(kinds)s::text[] IS NULL OR l.name = ANY (%(kinds)s::text[]))
           AND (SELECT j.kind FROM ONLY awc.jobs AS j
                WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.kind >= l.name
                ORDER BY j.kind LIMIT 1) = l.name)
       OR (l.scope = 'queue' AND (%(queues)s::text[] IS NULL OR l.name = ANY (%(queues)s::text[]))
           AND (SELECT j.queue FROM ONLY awc.jobs AS j
                WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.queue >= l.name
                ORDER BY j.queue LIMIT 1) = l.name)
), room AS MATERIALIZED (  -- the held ones, and each one's room (at most the slots)
    SELECT l.scope, l.name, l.rate, l.per_secs, greatest(least(
        coalesce(l.max_running - (  -- counted up to max_running: past it, no room
            SELECT count(*) FROM (
                SELECT 1 FROM ONLY awc.jobs AS r
                WHERE r.locked_until > s.at AND r.state = 'RUNNING'
                  AND CASE l.scope WHEN 'kind' THEN r.kind ELSE r.queue END = l.name
                LIMIT coalesce(l.max_running, 0)) AS running), 2147483647),
        coalesce(l.rate - (
            SELECT count(*) FROM awc.limit_claims AS c
            WHERE c.scope = l.scope AND c.name = l.name
              AND c.at > s.at - make_interval(secs => l.per_secs)), 2147483647),
        cardinality(%(slots)s::text[])), 0) AS room
    FROM relevant AS l, stamp AS s
    WHERE (l.scope = 'kind' AND l.name = ANY (s.held_kinds))
       OR (l.scope = 'queue' AND l.name = ANY (s.held_queues))
), gate AS MATERIALIZED (
    -- No limit can bind in this claim: each one it reaches is held, counts
    -- running jobs only (a rate logs its claims, below) and has room for
    -- every slot. Then nothing is held back, and step 3's one ordered walk
    -- claims, in priority order, at its usual cost.
    SELECT s.limited AND NOT EXISTS (
               SELECT 1 FROM relevant AS v
               LEFT JOIN room AS r ON r.scope = v.scope AND r.name = v.name
               WHERE r.name IS NULL OR v.rate IS NOT NULL
                  OR r.room < cardinality(%(slots)s::text[])) AS walk
    FROM stamp AS s
), lanes AS (
    -- Every lane with PENDING jobs, ready or not: a loose scan, one probe of
    -- jobs_ready_lane_idx per lane, however many jobs each holds.
    (SELECT j.kind, j.queue, j.priority
     FROM ONLY awc.jobs AS j
     WHERE j.state = 'PENDING' AND j.waiting = 0
       AND NOT (SELECT walk FROM gate) AND (SELECT limited FROM stamp)
     ORDER BY j.kind, j.queue, j.priority
     LIMIT 1)
    UNION ALL
    SELECT n.kind, n.queue, n.priority
    FROM lanes AS l, LATERAL (
        SELECT j.kind, j.queue, j.priority
        FROM ONLY awc.jobs AS j
        WHERE j.state = 'PENDING' AND j.waiting = 0
          AND (j.kind, j.queue, j.priority) > (l.kind, l.queue, l.priority)
        ORDER BY j.kind, j.queue, j.priority
        LIMIT 1) AS n
), mine AS MATERIALIZED (  -- the lanes this claim's filters allow
    SELECT l.kind, l.queue, l.priority
    FROM lanes AS l
    WHERE (%(kinds)s::text[] IS NULL OR l.kind = ANY (%(kinds)s::text[]))
      AND (%(queues)s::text[] IS NULL OR l.queue = ANY (%(queues)s::text[]))
), open AS MATERIALIZED (
    -- A lane is open unless a limit of its kind or queue is not held (another
    -- claimer has it this round); its cap is the smallest room that applies.
    SELECT m.kind, m.queue, m.priority,
           least(cardinality(%(slots)s::text[]), coalesce(k.room, 2147483647),
                 coalesce(q.room, 2147483647)) AS cap
    FROM mine AS m
    CROSS JOIN stamp AS s
    LEFT JOIN room AS k ON k.scope = 'kind' AND k.name = m.kind
    LEFT JOIN room AS q ON q.scope = 'queue' AND q.name = m.queue
    WHERE (m.kind <> ALL (s.limited_kinds) OR k.name IS NOT NULL)
      AND (m.queue <> ALL (s.limited_queues) OR q.name IS NOT NULL)
), cursors AS MATERIALIZED (  -- SPEC §23: this claimer's key cursors, one per priority
    SELECT coalesce(%(key_after)s::jsonb, '{}') AS c
), heads AS (
    -- SPEC §23 within each open lane: its keys in turn, as the fair claim
    -- takes them across a priority (claim_keyed_jobs.sql), from the key
    -- after this claimer's cursor of the lane's priority (%(key_after)s),
    -- wrapping to the first. One probe of jobs_ready_lane_idx (kind, queue,
    -- priority, key, run_at, id) per key, landing on its first ready job
    -- (within a key run_at orders the entries, so a key with no job due is
    -- passed inside the index). Jobs without a key are the key ''. The walk
    -- stops at one ready key more than the lane's cap: whether the lane
    -- holds back more is then known without a count. A key a per-key pause
    -- holds (its key's own limit at 0, key:* at 0 for a key without one,
    -- its kind's per-key limit at 0) is passed by and not counted: else a
    -- lane whose first keys were paused claimed nothing, for ever.
    SELECT o.kind, o.queue, o.priority, o.cap, h.k, h.id, h.run_at, h.phase, h.ok,
           h.ok::int AS n, h.bound
    FROM open AS o, LATERAL (
        SELECT e.k, e.id, e.run_at, e.phase, e.bound,
               NOT (e.k <> '' AND (SELECT keyed_limits FROM stamp)
                    AND awc.key_paused(e.k, o.kind)) AS ok
        FROM (SELECT coalesce(u.c ->> (-o.priority::int)::text, u.c ->> '*', '') AS bound
              FROM cursors AS u) AS b,
             LATERAL (
            (SELECT coalesce(j.key, '') AS k, j.id, j.run_at, 0 AS phase, b.bound
             FROM ONLY awc.jobs AS j
             WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.kind = o.kind AND j.queue = o.queue
               AND j.priority = o.priority AND coalesce(j.key, '') > b.bound
               AND j.run_at <= now()
             ORDER BY j.kind, j.queue, j.priority, coalesce(j.key, ''), j.run_at, j.id LIMIT 1)
            UNION ALL
            (SELECT coalesce(j.key, ''), j.id, j.run_at, 1, b.bound
             FROM ONLY awc.jobs AS j
             WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.kind = o.kind AND j.queue = o.queue
               AND j.priority = o.priority AND j.run_at <= now()
             ORDER BY j.kind, j.queue, j.priority, coalesce(j.key, ''), j.run_at, j.id LIMIT 1)
            LIMIT 1) AS e
        OFFSET 0) AS h  -- not flattened: a key's pause is probed once
    WHERE o.cap > 0
    UNION ALL
    SELECT g.kind, g.queue, g.priority, g.cap, h.k, h.id, h.run_at, h.phase, h.ok,
           g.n + h.ok::int, g.bound
    FROM heads AS g, LATERAL (
        SELECT e.k, e.id, e.run_at, e.phase,
               NOT (e.k <> '' AND (SELECT keyed_limits FROM stamp)
                    AND awc.key_paused(e.k, g.kind)) AS ok
        FROM (
            -- The next key in the same phase (after the cursor, or up to it),
            -- or past the last key the first, up to the cursor. Each runs
            -- only when its test of the last key holds (tested once, before
            -- the scan), so the bounds of the one that runs are the index's.
            (SELECT coalesce(j.key, '') AS k, j.id, j.run_at, 0 AS phase
             FROM ONLY awc.jobs AS j
             WHERE g.phase = 0
               AND j.state = 'PENDING' AND j.waiting = 0 AND j.kind = g.kind AND j.queue = g.queue
               AND j.priority = g.priority AND coalesce(j.key, '') > g.k AND j.run_at <= now()
             ORDER BY j.kind, j.queue, j.priority, coalesce(j.key, ''), j.run_at, j.id LIMIT 1)
            UNION ALL
            (SELECT coalesce(j.key, ''), j.id, j.run_at, 1
             FROM ONLY awc.jobs AS j
             WHERE g.phase = 0
               AND j.state = 'PENDING' AND j.waiting = 0 AND j.kind = g.kind AND j.queue = g.queue
               AND j.priority = g.priority AND coalesce(j.key, '') <= g.bound AND j.run_at <= now()
             ORDER BY j.kind, j.queue, j.priority, coalesce(j.key, ''), j.run_at, j.id LIMIT 1)
            UNION ALL
            (SELECT coalesce(j.key, ''), j.id, j.run_at, 1
             FROM ONLY awc.jobs AS j
             WHERE g.phase = 1
               AND j.state = 'PENDING' AND j.waiting = 0 AND j.kind = g.kind AND j.queue = g.queue
               AND j.priority = g.priority AND coalesce(j.key, '') > g.k
               AND coalesce(j.key, '') <= g.bound AND j.run_at <= now()
             ORDER BY j.kind, j.queue, j.priority, coalesce(j.key, ''), j.run_at, j.id LIMIT 1)
            LIMIT 1) AS e
        OFFSET 0) AS h
    WHERE g.n <= g.cap
), keys AS MATERIALIZED (  -- the lanes' ready keys, and how many each lane's walk found
    SELECT h.kind, h.queue, h.priority, h.cap, h.k, h.id, h.run_at, h.phase,
           max(h.n) OVER (PARTITION BY h.kind, h.queue, h.priority) AS found
    FROM heads AS h
    WHERE h.ok
), seen AS MATERIALIZED (
    -- The candidates, unlocked: with more ready keys than the lane's cap,
    -- each key's head (round-robin gives none of them a second job); else
    -- each key's first jobs, as many as round-robin could give it (the cap
    -- less one for each other key) and one more, so a lane that holds back
    -- more than it gave is seen.
    SELECT c.id, k.kind, k.queue, k.priority, c.run_at, nullif(k.k, '') AS key, k.k, k.phase
    FROM keys AS k, LATERAL (
        SELECT k.id, k.run_at
        WHERE k.found > k.cap
        UNION ALL
        (SELECT j.id, j.run_at
         FROM ONLY awc.jobs AS j
         WHERE k.found <= k.cap
           AND j.state = 'PENDING' AND j.waiting = 0 AND j.kind = k.kind AND j.queue = k.queue
           AND j.priority = k.priority AND coalesce(j.key, '') = k.k AND j.run_at <= now()
           -- from the head the walk found: no entry before it is a ready
           -- job in this snapshot (under a pinned horizon, a claimed job's)
           AND (j.run_at, j.id) >= (k.run_at, k.id)
         ORDER BY j.kind, j.queue, j.priority, coalesce(j.key, ''), j.run_at, j.id
         LIMIT k.cap - k.found + 2)) AS c
), ordered AS MATERIALIZED (
    -- Claim order (SPEC §4, §23): priority first, then each key's first job
    -- (across the lanes of that priority), then each key's second, the keys
    -- in their turn after the cursor.
    SELECT w.*, row_number() OVER (ORDER BY w.priority DESC, w.r, w.phase, w.k,
                                            w.run_at, w.id) AS o
    FROM (SELECT s.*, row_number() OVER (PARTITION BY s.priority, s.k
                                         ORDER BY s.run_at, s.id) AS r
          FROM seen AS s) AS w
), bound AS MATERIALIZED (
    -- Per-key limits (SPEC §23, as in claim_keyed_jobs.sql): each keyed
    -- candidate under a `key` or `kind_key` limit, ranked in claim order
    -- among that limit's candidates of the same key.
    SELECT w.id, l.scope, l.name, w.key, l.max_running, l.rate, l.per_secs,
           row_number() OVER (PARTITION BY l.scope, l.name, w.key ORDER BY w.o) AS rank
    FROM ordered AS w
    JOIN awc.limits AS l
      ON (l.scope = 'key' AND l.name = w.key) OR (l.scope = 'kind_key' AND l.name = w.kind)
         -- key:* for the keys that have no limit of their own (key:NAME replaces it)
         OR (l.scope = 'key' AND l.name = '*'
             AND NOT EXISTS (SELECT 1 FROM awc.limits AS own
                             WHERE own.scope = 'key' AND own.name = w.key))
    WHERE w.key IS NOT NULL AND (SELECT keyed_limits FROM stamp)
), key_room AS MATERIALIZED (  -- 0 unless step 1 holds the limit's row
    SELECT b.scope, b.name, b.key, b.rate, b.per_secs,
           CASE WHEN b.scope || ':' || b.name <> ALL (s.held_keys) THEN 0
                ELSE least(coalesce(b.max_running - (
                    SELECT count(*) FROM (
                        SELECT 1 FROM ONLY awc.jobs AS r
                        WHERE r.state = 'RUNNING' AND r.key = b.key
                          AND (b.scope = 'key' OR r.kind = b.name)
                          AND r.locked_until > s.at
                        LIMIT coalesce(b.max_running, 0)) AS running), 2147483647),
                    coalesce(b.rate - (
                        SELECT count(*) FROM awc.limit_claims AS c
                        WHERE c.scope = b.scope AND c.name = b.name AND c.key = b.key
                          AND c.at > s.at - make_interval(secs => b.per_secs)), 2147483647))
           END AS room
    FROM (SELECT DISTINCT scope, name, key, max_running, rate, per_secs FROM bound) AS b,
         stamp AS s
), picked AS MATERIALIZED (
    -- The first of them in claim order, across every lane, that fit their
    -- limits' rooms, as many as there are slots.
    SELECT d.id, d.kind, d.queue, d.priority, d.k, d.phase, d.o
    FROM (
        SELECT w.*,
               row_number() OVER (PARTITION BY w.kind ORDER BY w.o) AS kind_n,
               row_number() OVER (PARTITION BY w.queue ORDER BY w.o) AS queue_n
        FROM ordered AS w
    ) AS d
    LEFT JOIN room AS k ON k.scope = 'kind' AND k.name = d.kind
    LEFT JOIN room AS q ON q.scope = 'queue' AND q.name = d.queue
    WHERE (k.name IS NULL OR d.kind_n <= k.room) AND (q.name IS NULL OR d.queue_n <= q.room)
      AND NOT EXISTS (SELECT 1 FROM bound AS b
                      JOIN key_room AS r
                        ON r.scope = b.scope AND r.name = b.name AND r.key = b.key
                      WHERE b.id = d.id AND b.rank > r.room)
    ORDER BY d.o
    LIMIT cardinality(%(slots)s::text[])
), chosen AS MATERIALIZED (  -- how many from each key of each lane
    SELECT p.kind, p.queue, p.priority, p.k, count(*) AS n
    FROM picked AS p
    GROUP BY p.kind, p.queue, p.priority, p.k
), locked AS MATERIALIZED (
    -- Each key of each lane locks as many as were chosen from it (SKIP
    -- LOCKED: one another claimer took meanwhile gives way to the key's
    -- next, which keeps its turn); with per-key limits, the chosen jobs
    -- themselves, since a key's next job may be of a kind whose room was
    -- not counted for it.
    SELECT p.id, p.priority, p.run_at
    FROM chosen AS c, LATERAL (
        SELECT j.id, j.priority, j.run_at
        FROM ONLY awc.jobs AS j
        WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.kind = c.kind AND j.queue = c.queue
          AND j.priority = c.priority AND coalesce(j.key, '') = c.k AND j.run_at <= now()
        ORDER BY j.kind, j.queue, j.priority, coalesce(j.key, ''), j.run_at, j.id
        LIMIT c.n
        FOR UPDATE OF j SKIP LOCKED
    ) AS p
    WHERE NOT (SELECT keyed_limits FROM stamp)
    UNION ALL
    SELECT i.id, i.priority, i.run_at FROM (
        SELECT j.id, j.priority, j.run_at
        FROM ONLY awc.jobs AS j
        WHERE j.id = ANY (ARRAY(SELECT id FROM picked)) AND (SELECT keyed_limits FROM stamp)
          AND j.state = 'PENDING' AND j.waiting = 0 AND j.run_at <= now()
        FOR UPDATE OF j SKIP LOCKED) AS i
), allowed AS (
    SELECT l.id, row_number() OVER (ORDER BY l.priority DESC, l.run_at, l.id) AS n
    FROM locked AS l
), claimed AS (
    UPDATE ONLY awc.jobs AS j
    SET state = 'RUNNING',
        attempts = least(j.attempts, 2147483646) + 1,  -- int max: spent, not an overflow
        locked_by = (%(slots)s::text[])[a.n],
        locked_until = now() + make_interval(secs => least(
            coalesce((%(leases)s::jsonb ->> j.kind)::float8, %(lease)s::float8),
            %(cap)s::float8)),
        -- The claim's nonce with the slot's number (tick.queue.lost_tokens):
        -- a claim whose answer is lost is still known by its tokens.
        claim_token = overlay(%(nonce)s::text
                              PLACING lpad(to_hex(a.n), 4, '0') FROM 33 FOR 4)::uuid,
        started_at = (SELECT at FROM stamp),  -- the stamp a rate window counts
        updated_at = now()
    FROM allowed AS a
    WHERE j.id = a.id
    RETURNING j.id, j.kind, j.queue, j.payload::text AS payload, j.attempts, j.max_attempts,
        j.claim_token::text AS token, j.locked_by,
        extract(epoch FROM j.locked_until - now())::float8 AS lease_s,
        coalesce(extract(epoch FROM now() - CASE WHEN isfinite(j.run_at) THEN j.run_at END)
                 ::float8, 0) AS wait_s,
        j.checkpoint::text AS checkpoint,
        -- SPEC §21: the stored trace context, and whether a run came before.
        j.trace_context::text AS trace, j.trace_context IS NOT NULL
            AND (j.attempts > 1 OR j.continues > 0 OR j.errors <> '[]') AS rerun,
        j.timeout_secs AS timeout_s  -- SPEC §26: its own timeout, or null
), paused AS (  -- max_running = 0: no room will come back during this run
    SELECT scope, name FROM awc.limits WHERE max_running = 0
), logged AS (
    INSERT INTO awc.limit_claims (scope, name, at)
    SELECT h.scope, h.name, (SELECT at FROM stamp)
    FROM claimed AS c
    JOIN room AS h ON h.rate IS NOT NULL
        AND h.name = CASE h.scope WHEN 'kind' THEN c.kind ELSE c.queue END
), logged_keys AS (  -- a per-key rate's claims (SPEC §23), one row per job and key
    INSERT INTO awc.limit_claims (scope, name, key, at)
    SELECT b.scope, b.name, b.key, (SELECT at FROM stamp)
    FROM bound AS b
    JOIN claimed AS c ON c.id = b.id
    WHERE b.rate IS NOT NULL
), forgot_keys AS (
    DELETE FROM awc.limit_claims AS c
    USING key_room AS r
    WHERE r.rate IS NOT NULL AND c.scope = r.scope AND c.name = r.name AND c.key = r.key
      AND c.at <= (SELECT at FROM stamp) - make_interval(secs => r.per_secs)
), forgot AS (
    DELETE FROM awc.limit_claims AS c
    USING room AS h
    WHERE h.rate IS NOT NULL AND c.scope = h.scope AND c.name = h.name
      AND c.at <= (SELECT at FROM stamp) - make_interval(secs => h.per_secs)
), held AS MATERIALIZED (  -- what the last row says (below), worked out once
    SELECT EXISTS (
        SELECT 1
        FROM mine AS m
        CROSS JOIN stamp AS s
        LEFT JOIN open AS o
            ON o.kind = m.kind AND o.queue = m.queue AND o.priority = m.priority AND o.cap > 0
        WHERE (m.kind = ANY (s.limited_kinds) OR m.queue = ANY (s.limited_queues))
          AND NOT EXISTS (SELECT 1 FROM paused AS z
                          WHERE (z.scope = 'kind' AND z.name = m.kind)
                             OR (z.scope = 'queue' AND z.name = m.queue))
          AND CASE WHEN o.kind IS NOT NULL
                   -- an open lane: a candidate not taken (its walk read one
                   -- key more than its cap, or a key's job more than it could get)
                   THEN EXISTS (SELECT 1 FROM ordered AS w
                                WHERE w.kind = m.kind AND w.queue = m.queue
                                  AND w.priority = m.priority
                                  AND w.id NOT IN (SELECT id FROM picked))
                   -- a closed one (no room, or its limit held elsewhere): a ready job
                   ELSE EXISTS (
                       SELECT 1 FROM ONLY awc.jobs AS j
                       WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.kind = m.kind
                         AND j.queue = m.queue AND j.priority = m.priority AND j.run_at <= now()
                         -- a job a per-key pause holds is not held back by the lane's limit
                         AND NOT ((SELECT keyed_limits FROM stamp)
                                  AND awc.key_paused(j.key, j.kind)))
              END
    ) OR (  -- another claimer took a chosen job and its key had no next one
        (SELECT count(*) FROM locked) < (SELECT count(*) FROM picked)
    ) OR EXISTS (  -- or a per-key limit (SPEC §23) kept a candidate out, not a paused key
        SELECT 1 FROM bound AS b
        JOIN key_room AS r ON r.scope = b.scope AND r.name = b.name AND r.key = b.key
        WHERE b.rank > r.room AND b.max_running IS DISTINCT FROM 0
    ) AS held_back
), turn AS MATERIALIZED (
    -- SPEC §23: the next key cursors (awc.key_turn, as the fair claim's):
    -- the last key served at the last priority served, so the next claim of
    -- that priority starts with the key after it; when none was served (a
    -- per-key limit held every key walked), past the keys walked, so the
    -- next claim reaches the keys after them. Null (keep the cursors) when
    -- no lane had a ready key.
    SELECT CASE WHEN u.c -> '~' ->> 0 = (-t.priority::int)::text  -- the usual case
                    THEN u.c || jsonb_build_object((-t.priority::int)::text, t.k)
                ELSE awc.key_turn(u.c, -t.priority::int, t.k)
           END AS k
    FROM cursors AS u, (
          (SELECT p.priority, p.k FROM picked AS p
           ORDER BY p.priority, p.phase DESC, p.k DESC LIMIT 1)
          UNION ALL
          (SELECT k.priority, k.k FROM keys AS k
           ORDER BY k.priority, k.phase DESC, k.k DESC LIMIT 1)
          LIMIT 1) AS t
)
-- The claimed jobs, then one row more (id null) with the next key cursors,
-- whether this step was the claim (`lanes`: a limit may bind; the engine then
-- sends steps 1 and 2 alone next time) and whether ready jobs of a limited
-- kind or queue were held back, so the tick is not drained (SPEC §18): a
-- lane of a limit, not paused, with more ready jobs than were taken from it.
-- A paused one (max_running = 0) holds nothing back. It also leaves how many
-- slots this step filled, and that answer, to the statements after it.
SELECT id, kind, payload, attempts, max_attempts, token, locked_by, lease_s, wait_s, checkpoint,
       queue, trace, rerun, timeout_s, NULL::text AS key_mark, NULL::boolean AS lanes,
       NULL::boolean AS held_back
FROM claimed
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       (SELECT k::text FROM turn), (SELECT limited AND NOT walk FROM stamp, gate), h.held_back
FROM (
    SELECT b.held_back,
           set_config('awc.limited_claimed', (SELECT count(*) FROM claimed)::text, true),
           -- the transaction's count, for the history statement: the engine
           -- sends no claim after this one while it is the claim (`lanes`)
           set_config('awc.claimed', (SELECT count(*) FROM claimed)::text, true),
           set_config('awc.held_back', b.held_back::text, true),
           set_config('awc.walk', (SELECT walk FROM gate)::text, true)
    FROM held AS b
) AS h
