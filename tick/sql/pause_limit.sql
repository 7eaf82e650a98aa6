-- `awc pause kind:NAME|queue:NAME` and the console's Pause (SPEC §22): a
-- max_running of 0 that keeps the limit's rate and per_secs and remembers
-- the max_running it had (`paused_from`), or a new limit made only for the
-- pause. A row comes back when this paused it; none when it was paused already.
INSERT INTO awc.limits (scope, name, max_running, paused, paused_from)
VALUES (%(scope)s, %(name)s, 0, true, NULL)
ON CONFLICT (scope, name) DO UPDATE
SET max_running = 0, paused = true, paused_from = awc.limits.max_running
WHERE NOT awc.limits.paused
RETURNING 1
