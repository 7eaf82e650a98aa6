-- Prune the tick history (SPEC §16, AWC_TICK_HISTORY_SECS): one bounded batch.
-- A row still open whose deadline has not passed is a run under way (a loop
-- busy for longer than the history keeps renews its stretch's deadline): it
-- stays, or its end would update nothing and the run go unrecorded. One
-- unfinished whose deadline passed died, and goes as any other.
WITH old AS (
    SELECT id FROM awc.ticks
    WHERE started_at < now() - make_interval(secs => %(after_secs)s::float8)
      AND (finished_at IS NOT NULL OR deadline_at IS NULL OR deadline_at < now())
    ORDER BY started_at
    LIMIT %(limit)s
)
DELETE FROM awc.ticks AS t USING old WHERE t.id = old.id
