-- Insert a tick's row of the history (SPEC §16) when its driver names itself.
-- It rides in the maintenance pass's first exchange, with the rescue lock and
-- the rescue (maintenance.py), so a tick pays no round trip for its row.
-- The deadline comes as the time left, made an instant on the database's
-- clock, the one `awc ticks` compares it with.
INSERT INTO awc.ticks (driver, worker_id, correlation_id, deadline_at)
SELECT %(driver)s, %(worker_id)s, %(correlation_id)s,
       now() + make_interval(secs => %(deadline_secs)s::float8)
RETURNING id
