-- This transaction's commit does not wait for its WAL to reach the disk
-- (decision 0040): for the transactions whose writes the next pass would
-- make again, or that only record a run that claimed nothing: a
-- maintenance pass (its rescue is redone by the next; its history row
-- opened) and a run's row completed on its own. A later commit that waits
-- (any claim or outcome) flushes this one's WAL first, so nothing recorded
-- after it can outlive it; a server crash within the WAL writer's delay
-- (200 ms by default) may lose it alone.
SELECT set_config('synchronous_commit', 'off', true)
