-- The limits of this claim (SPEC §18, docs/decisions/0012), step 2 of 3:
-- claim ready jobs of the limits step 1 holds, up to each one's room: its
-- max_running less the RUNNING jobs with unexpired leases, and its rate less
-- the claims of the last per_secs. This statement's snapshot is newer than
-- step 1's locks, so the counts include every earlier holder's claims. The
-- claims are stamped with one clock_timestamp() taken under the locks, so a
-- window looking back sees every claim before it. A job whose kind and queue
-- are both limited needs both held and fits both rooms (counted
-- conservatively: never more, sometimes fewer). The slots filled are the
-- first ones of %(slots)s; step 3 (the usual claim) fills the rest.
WITH stamp AS MATERIALIZED (
    SELECT clock_timestamp() AS at,
           (SELECT coalesce(nullif(current_setting('awc.held_kinds', true), ''), '{}'))::text[]
               AS held_kinds,
           (SELECT coalesce(nullif(current_setting('awc.held_queues', true), ''), '{}'))::text[]
               AS held_queues,
           (SELECT coalesce(nullif(current_setting('awc.limited_kinds', true), ''), '{}'))::text[]
               AS limited_kinds,
           (SELECT coalesce(nullif(current_setting('awc.limited_queues', true), ''), '{}'))::text[]
               AS limited_queues,
           (SELECT cardinality(coalesce(nullif(current_setting('awc.limited_kinds', true), ''),
                                        '{}')::text[]) > 0
                   AND cardinality(coalesce(nullif(current_setting('awc.limited_queues', true),
                                                   ''), '{}')::text[]) > 0) AS crossed
), wanted AS MATERIALIZED (
    -- The held limits with ready jobs: only theirs are counted. Each probe
    -- asks for its index's order, and says "name = x" as a range, so that
    -- only that index gives the order without a sort (which the pinned plan
    -- refuses): with statistics that call every name equally likely (one
    -- queue so far), an equality would let the planner walk any ready index.
    SELECT l.scope, l.name, l.max_running, l.rate, l.per_secs
    FROM awc.limits AS l, stamp AS s
    WHERE (l.scope = 'kind' AND l.name = ANY (s.held_kinds) AND (
               SELECT j.id FROM awc.jobs AS j
               WHERE j.state = 'PENDING' AND j.kind >= l.name AND j.kind <= l.name
               AND j.run_at <= now()
               ORDER BY j.kind, j.priority DESC, j.run_at, j.id LIMIT 1) IS NOT NULL)
       OR (l.scope = 'queue' AND l.name = ANY (s.held_queues) AND (
               SELECT j.id FROM awc.jobs AS j
               WHERE j.state = 'PENDING' AND j.queue >= l.name AND j.queue <= l.name
               AND j.run_at <= now()
               ORDER BY j.queue, j.priority DESC, j.run_at, j.id LIMIT 1) IS NOT NULL)
), room AS MATERIALIZED (
    SELECT l.scope, l.name, l.rate, l.per_secs, greatest(least(
        coalesce(l.max_running - (
            SELECT count(*) FROM awc.jobs AS r
            WHERE r.locked_until > s.at AND r.state = 'RUNNING'
              AND CASE l.scope WHEN 'kind' THEN r.kind ELSE r.queue END = l.name), 2147483647),
        coalesce(l.rate - (
            SELECT count(*) FROM awc.limit_claims AS c
            WHERE c.scope = l.scope AND c.name = l.name
              AND c.at > s.at - make_interval(secs => l.per_secs)), 2147483647),
        cardinality(%(slots)s::text[])), 0) AS room
    FROM wanted AS l, stamp AS s
), picked AS MATERIALIZED (
    SELECT p.id, p.kind, p.queue, p.priority, p.run_at
    FROM room AS h, stamp AS s, LATERAL (
        SELECT j.id, j.kind, j.queue, j.priority, j.run_at
        FROM awc.jobs AS j
        WHERE j.state = 'PENDING' AND j.kind = h.name AND j.run_at <= now()
          AND (%(queues)s::text[] IS NULL OR j.queue = ANY (%(queues)s::text[]))
          AND (j.queue <> ALL (s.limited_queues) OR j.queue = ANY (s.held_queues))
        ORDER BY j.kind, j.priority DESC, j.run_at, j.id
        LIMIT h.room
        FOR UPDATE OF j SKIP LOCKED
    ) AS p
    WHERE h.scope = 'kind' AND h.room > 0
    UNION ALL
    SELECT p.id, p.kind, p.queue, p.priority, p.run_at
    FROM room AS h, stamp AS s, LATERAL (
        SELECT j.id, j.kind, j.queue, j.priority, j.run_at
        FROM awc.jobs AS j
        WHERE j.state = 'PENDING' AND j.queue = h.name AND j.run_at <= now()
          AND (%(kinds)s::text[] IS NULL OR j.kind = ANY (%(kinds)s::text[]))
          AND (j.kind <> ALL (s.limited_kinds) OR j.kind = ANY (s.held_kinds))
        ORDER BY j.queue, j.priority DESC, j.run_at, j.id
        LIMIT h.room
        FOR UPDATE OF j SKIP LOCKED
    ) AS p
    WHERE h.scope = 'queue' AND h.room > 0
), allowed AS (
    -- No kind and queue both limited: no job has two limits, and each
    -- lateral above took at most its limit's room.
    SELECT o.id, row_number() OVER (ORDER BY o.priority DESC, o.run_at, o.id) AS n
    FROM (SELECT p.id, p.priority, p.run_at FROM picked AS p
          WHERE NOT (SELECT crossed FROM stamp)
          ORDER BY p.priority DESC, p.run_at, p.id
          LIMIT cardinality(%(slots)s::text[])) AS o
    UNION ALL
    -- Both: a job may come from both laterals, and must fit both rooms.
    SELECT r.id, row_number() OVER (ORDER BY r.priority DESC, r.run_at, r.id) AS n
    FROM (
        SELECT d.*,
               row_number() OVER (PARTITION BY d.kind ORDER BY d.priority DESC, d.run_at, d.id)
                   AS kind_n,
               row_number() OVER (PARTITION BY d.queue ORDER BY d.priority DESC, d.run_at, d.id)
                   AS queue_n
        FROM (SELECT DISTINCT * FROM picked WHERE (SELECT crossed FROM stamp)) AS d
    ) AS r
    LEFT JOIN room AS k ON k.scope = 'kind' AND k.name = r.kind
    LEFT JOIN room AS q ON q.scope = 'queue' AND q.name = r.queue
    WHERE (k.name IS NULL OR r.kind_n <= k.room) AND (q.name IS NULL OR r.queue_n <= q.room)
    ORDER BY n
    LIMIT cardinality(%(slots)s::text[])
), claimed AS (
    UPDATE awc.jobs AS j
    SET state = 'RUNNING',
        attempts = j.attempts + 1,
        locked_by = (%(slots)s::text[])[a.n],
        locked_until = now() + make_interval(secs => least(
            coalesce((%(leases)s::jsonb ->> j.kind)::float8, %(lease)s::float8),
            %(cap)s::float8)),
        claim_token = gen_random_uuid(),
        started_at = (SELECT at FROM stamp),  -- the stamp a rate window counts
        updated_at = now()
    FROM allowed AS a
    WHERE j.id = a.id
    RETURNING j.id, j.kind, j.queue, j.payload::text AS payload, j.attempts, j.max_attempts,
        j.claim_token::text AS token, j.locked_by,
        extract(epoch FROM j.locked_until - now())::float8 AS lease_s,
        coalesce(extract(epoch FROM now() - CASE WHEN isfinite(j.run_at) THEN j.run_at END)
                 ::float8, 0) AS wait_s,
        j.checkpoint::text AS checkpoint
), paused AS (  -- max_running = 0: no room will come back during this run
    SELECT scope, name FROM awc.limits WHERE max_running = 0
), logged AS (
    INSERT INTO awc.limit_claims (scope, name, at)
    SELECT h.scope, h.name, (SELECT at FROM stamp)
    FROM claimed AS c
    JOIN room AS h ON h.rate IS NOT NULL
        AND h.name = CASE h.scope WHEN 'kind' THEN c.kind ELSE c.queue END
), forgot AS (
    DELETE FROM awc.limit_claims AS c
    USING room AS h
    WHERE h.rate IS NOT NULL AND c.scope = h.scope AND c.name = h.name
      AND c.at <= (SELECT at FROM stamp) - make_interval(secs => h.per_secs)
)
-- The claimed jobs, then one row more (id null) that says whether ready jobs
-- of a limited kind or queue were held back, so the tick is not drained
-- (SPEC §18): a limit whose room the claim used up, or one at no room, or one
-- another claimer held, with ready jobs. A paused one (max_running = 0)
-- holds nothing back. It also leaves how many slots this step filled, and
-- that answer, to the statements after it.
SELECT id, kind, payload, attempts, max_attempts, token, locked_by, lease_s, wait_s, checkpoint,
       NULL::boolean AS held_back
FROM claimed
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, h.held_back
FROM (
    SELECT b.held_back,
           set_config('awc.limited_claimed', (SELECT count(*) FROM claimed)::text, true),
           set_config('awc.held_back', b.held_back::text, true)
    FROM (
        SELECT EXISTS (  -- its room used up by this claim
                   SELECT 1 FROM room AS r
                   WHERE r.room > 0 AND r.room <= (
                       SELECT count(*) FROM picked AS p
                       WHERE r.name = CASE r.scope WHEN 'kind' THEN p.kind ELSE p.queue END))
            OR EXISTS (  -- no room, or held by another claimer: ready jobs wait
                   SELECT 1
                   FROM stamp AS s,
                        LATERAL (SELECT 'kind' AS scope, k AS name FROM unnest(s.limited_kinds) AS k
                                 UNION ALL
                                 SELECT 'queue', q FROM unnest(s.limited_queues) AS q) AS l
                   WHERE NOT EXISTS (SELECT 1 FROM paused AS z
                                     WHERE z.scope = l.scope AND z.name = l.name)
                     AND NOT EXISTS (SELECT 1 FROM room AS r
                                     WHERE r.scope = l.scope AND r.name = l.name AND r.room > 0)
                     AND ((l.scope = 'kind' AND (
                              SELECT j.id FROM awc.jobs AS j
                              WHERE j.state = 'PENDING' AND j.kind >= l.name AND j.kind <= l.name
               AND j.run_at <= now()
                                AND (%(queues)s::text[] IS NULL
                                     OR j.queue = ANY (%(queues)s::text[]))
                              ORDER BY j.kind, j.priority DESC, j.run_at, j.id
                              LIMIT 1) IS NOT NULL)
                          OR (l.scope = 'queue' AND (
                              SELECT j.id FROM awc.jobs AS j
                              WHERE j.state = 'PENDING' AND j.queue >= l.name AND j.queue <= l.name
               AND j.run_at <= now()
                                AND (%(kinds)s::text[] IS NULL
                                     OR j.kind = ANY (%(kinds)s::text[]))
                              ORDER BY j.queue, j.priority DESC, j.run_at, j.id
                              LIMIT 1) IS NOT NULL)))
            AS held_back
    ) AS b
) AS h
