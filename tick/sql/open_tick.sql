-- Insert a tick's row of the history (SPEC §16) when its driver names itself.
-- It rides in the maintenance pass's first exchange, with the rescue lock and
-- the rescue (maintenance.py), so a tick pays no round trip for its row.
-- The deadline comes as the time left, made an instant on the database's
-- clock, the one `awc ticks` compares it with. The tick's key (`row_key`,
-- migration 0033) makes the opening sent again after a lost connection
-- return the row the first one wrote: one row a tick.
INSERT INTO awc.ticks (driver, worker_id, correlation_id, deadline_at, row_key)
SELECT %(driver)s, %(worker_id)s, %(correlation_id)s,
       now() + make_interval(secs => %(deadline_secs)s::float8), %(row_key)s::uuid
ON CONFLICT (row_key) WHERE row_key IS NOT NULL
    DO UPDATE SET row_key = EXCLUDED.row_key
RETURNING id
