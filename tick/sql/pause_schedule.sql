-- Pause or resume a schedule (SPEC §15): a resumed schedule fires from now on,
-- with no catch-up of what fell due while it was paused. A parked one (no
-- next fire: a tick could not plan it, perhaps for its host's time zone data)
-- is resumed too, from now: resume said "resumed" and left it parked.
UPDATE awc.schedules
SET paused = %(paused)s,
    next_fire_at = CASE WHEN (paused OR next_fire_at IS NULL) AND NOT %(paused)s
                        THEN %(next_fire_at)s
                        ELSE next_fire_at END,
    updated_at = now()
WHERE name = %(name)s
RETURNING name
