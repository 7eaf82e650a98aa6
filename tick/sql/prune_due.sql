-- Whether the hourly prune is due across all processes (SPEC §7.3): asked
-- in the maintenance pass's first exchange, and again under the prune's lock.
SELECT last_run_at <= now() - make_interval(secs => %(every_secs)s::float8)
FROM awc.maintenance
WHERE step = 'prune'
