-- The limits of this claim (SPEC §18, docs/decisions/0012), step 1 of 3.
-- Lock the limit rows this claim may fill, never waiting (SKIP LOCKED: one
-- another claimer holds is left to it this round), and keep for the rest of
-- the transaction the limits held and every limited kind and queue, and
-- the per-key limits held (SPEC §23: `key` and `kind_key` rows). The
-- counts are taken by the next statement, whose snapshot is newer than the
-- locks: it sees every claim an earlier holder committed.
WITH held AS (
    SELECT scope, name
    FROM awc.limits
    WHERE (scope <> 'kind' OR %(kinds)s::text[] IS NULL OR name = ANY (%(kinds)s::text[]))
      AND (scope <> 'queue' OR %(queues)s::text[] IS NULL OR name = ANY (%(queues)s::text[]))
    ORDER BY scope, name
    FOR UPDATE SKIP LOCKED
), limited AS (
    SELECT scope, name FROM awc.limits
)
SELECT set_config('awc.held_kinds', (SELECT coalesce(array_agg(name), '{}')::text
                                     FROM held WHERE scope = 'kind'), true),
       set_config('awc.held_queues', (SELECT coalesce(array_agg(name), '{}')::text
                                      FROM held WHERE scope = 'queue'), true),
       set_config('awc.limited_kinds', (SELECT coalesce(array_agg(name), '{}')::text
                                        FROM limited WHERE scope = 'kind'), true),
       set_config('awc.limited_queues', (SELECT coalesce(array_agg(name), '{}')::text
                                         FROM limited WHERE scope = 'queue'), true),
       set_config('awc.held_key_limits', (SELECT coalesce(array_agg(scope || ':' || name),
                                                          '{}')::text
                                          FROM held WHERE scope IN ('key', 'kind_key')), true),
       set_config('awc.key_limited', (SELECT count(*) > 0 FROM limited
                                      WHERE scope IN ('key', 'kind_key'))::text, true)
