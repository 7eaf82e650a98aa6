-- A schedule whose stored cron or time zone cannot be used (written by plain
-- SQL, past the checks of `add`): never due again until an operator fixes it
-- (an add or sync recomputes next_fire_at). One bad row must not stop the
-- other schedules (SPEC §4.2).
UPDATE awc.schedules SET next_fire_at = NULL, updated_at = now() WHERE name = %(name)s
