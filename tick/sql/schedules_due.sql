-- Whether any schedule is due (SPEC §15): asked in the maintenance pass's
-- first exchange, so a tick with no schedule due pays no round trip to learn it.
SELECT EXISTS (SELECT 1 FROM awc.schedules WHERE NOT paused AND next_fire_at <= now())
