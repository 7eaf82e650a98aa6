-- `awc limits set` (SPEC §18): this limit's row, replacing any earlier one;
-- an explicit limit ends a pause (SPEC §22), so `awc resume` leaves it be.
INSERT INTO awc.limits (scope, name, max_running, rate, per_secs)
VALUES (%(scope)s, %(name)s, %(max_running)s, %(rate)s, %(per_secs)s)
ON CONFLICT (scope, name) DO UPDATE
SET max_running = EXCLUDED.max_running, rate = EXCLUDED.rate, per_secs = EXCLUDED.per_secs,
    paused = false, paused_from = NULL
