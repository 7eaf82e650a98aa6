-- A whole tick's row at once (SPEC §16): a loop's busy stretch or idle
-- interval when it ends, or a tick that failed before it had a row.
INSERT INTO awc.ticks (driver, worker_id, correlation_id, started_at, finished_at, deadline_at,
                       claimed, completed, retried, failed, cancelled, released, discarded,
                       rescued, pruned, fired, stop_reason, error)
VALUES (%(driver)s, %(worker_id)s, %(correlation_id)s,
        coalesce(%(started_at)s, now()), now(), %(deadline_at)s,
        %(claimed)s, %(completed)s, %(retried)s, %(failed)s, %(cancelled)s, %(released)s,
        %(discarded)s, %(rescued)s, %(pruned)s, %(fired)s, %(stop_reason)s, %(error)s)
RETURNING id
