-- Prune the schedule ledger (SPEC §15, AWC_SCHEDULE_HISTORY_SECS): one bounded batch.
WITH old AS (
    SELECT schedule, fire_at FROM awc.schedule_fires
    WHERE recorded_at < now() - make_interval(secs => %(after_secs)s::float8)
    ORDER BY recorded_at
    LIMIT %(limit)s
)
DELETE FROM awc.schedule_fires AS f
USING old
WHERE f.schedule = old.schedule AND f.fire_at = old.fire_at
