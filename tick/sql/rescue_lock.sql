-- Take the rescue step's lock for this transaction (SPEC §7.3), say whether
-- any schedule is due (SPEC §15) and whether the prune is, and, when a driver
-- names itself, insert this tick's row of the history (SPEC §16). All ride in
-- a statement every tick sends anyway, in the same exchange as the rescue
-- itself: a tick pays no round trip for schedules, history or the prune check.
WITH started AS (
    INSERT INTO awc.ticks (driver, worker_id, correlation_id, deadline_at)
    -- The deadline comes as the time left, made an instant on the database's
    -- clock, the one `awc ticks` compares it with.
    SELECT %(driver)s, %(worker_id)s, %(correlation_id)s,
           now() + make_interval(secs => %(deadline_secs)s::float8)
    WHERE %(driver)s::text IS NOT NULL
    RETURNING id
)
SELECT pg_try_advisory_xact_lock(%(key)s::bigint),
       EXISTS (SELECT 1 FROM awc.schedules WHERE NOT paused AND next_fire_at <= now()),
       (SELECT id FROM started),
       -- Whether the hourly prune is due (prune_due.sql, asked again under its lock).
       EXISTS (SELECT 1 FROM awc.maintenance WHERE step = 'prune'
               AND last_run_at <= now() - make_interval(secs => %(prune_every)s::float8))
