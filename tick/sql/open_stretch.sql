-- Open a loop's busy stretch's row of the history (SPEC §16) in the round
-- trip of the stretch's first claim, so a loop killed mid-stretch leaves a
-- row that shows it died. It rides at the end of that round trip (no round
-- trip of its own) and is written only if that round trip's claim took a job
-- (awc.claimed, which the claim sets: SPEC §24, counted, never a walk of the
-- running jobs): the stretch began. Unfinished, the row is `died` once
-- its deadline_at passes: a lease on the row that the running loop renews
-- (renew_tick.sql) and a killed one cannot.
INSERT INTO awc.ticks (driver, worker_id, correlation_id, deadline_at)
SELECT %(driver)s, %(worker_id)s, %(correlation_id)s,
       now() + make_interval(secs => %(lease_secs)s::float8)
WHERE coalesce(nullif(current_setting('awc.claimed', true), ''), '0')::int > 0
RETURNING id
