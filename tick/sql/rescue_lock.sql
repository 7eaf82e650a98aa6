-- Take the rescue step's lock for this transaction (SPEC §7.3), and say
-- whether any schedule is due (SPEC §15). The check rides in a statement
-- every tick sends anyway, so a tick with nothing due pays no round trip for
-- schedules; it reads one entry of schedules_due_idx at most.
SELECT pg_try_advisory_xact_lock(%(key)s::bigint),
       EXISTS (SELECT 1 FROM awc.schedules WHERE NOT paused AND next_fire_at <= now())
