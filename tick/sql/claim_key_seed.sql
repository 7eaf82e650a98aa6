-- The fair claim's key cursor a new process starts from (SPEC §23, decision
-- 0034): the last key the newest run that served keys left on its history
-- row (finish_tick, record_tick). A `awc tick` from cron, a Lambda
-- invocation or a restarted loop thus goes on with the rotation where the
-- last run left it, instead of starting at the first key again: with more
-- keys than a run claims, the keys late in sort order were never served.
-- Any text is a valid place to start (the walk takes the keys after it).
SELECT t.key_after
FROM awc.ticks AS t
WHERE t.key_after IS NOT NULL
ORDER BY t.id DESC
LIMIT 1
