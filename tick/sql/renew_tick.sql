-- Push back the deadline of a loop stretch's unfinished row (SPEC §16): the
-- loop is alive, so the stretch has not died. Sent once half the row's lease
-- is spent, never on the hot path.
UPDATE awc.ticks
SET deadline_at = now() + make_interval(secs => %(lease_secs)s::float8)
WHERE id = %(id)s AND finished_at IS NULL
