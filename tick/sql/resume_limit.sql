-- `awc resume kind:NAME|queue:NAME` and the console's Resume (SPEC §22):
-- a limit `awc pause` set gets back the max_running it had before the pause
-- ('restored'); one that only existed for the pause, with no max_running
-- before and no rate, is removed ('removed'). No row: it was not paused.
WITH held AS (
    SELECT scope, name, paused_from, rate
    FROM awc.limits
    WHERE scope = %(scope)s AND name = %(name)s AND paused
    FOR UPDATE
), removed AS (
    DELETE FROM awc.limits AS l
    USING held AS h
    WHERE l.scope = h.scope AND l.name = h.name
      AND h.paused_from IS NULL AND h.rate IS NULL
    RETURNING 'removed'::text AS outcome
), restored AS (
    UPDATE awc.limits AS l
    SET max_running = h.paused_from, paused = false, paused_from = NULL
    FROM held AS h
    WHERE l.scope = h.scope AND l.name = h.name
      AND NOT (h.paused_from IS NULL AND h.rate IS NULL)
    RETURNING 'restored'::text AS outcome
)
SELECT outcome FROM removed
UNION ALL
SELECT outcome FROM restored
