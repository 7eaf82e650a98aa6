-- Prune the tick history (SPEC §16, AWC_TICK_HISTORY_SECS): one bounded batch.
WITH old AS (
    SELECT id FROM awc.ticks
    WHERE started_at < now() - make_interval(secs => %(after_secs)s::float8)
    ORDER BY started_at
    LIMIT %(limit)s
)
DELETE FROM awc.ticks AS t USING old WHERE t.id = old.id
