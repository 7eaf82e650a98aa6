-- One schedule, for the commands that act on it by name (SPEC §15).
SELECT name, cron, timezone, paused FROM awc.schedules WHERE name = %(name)s
