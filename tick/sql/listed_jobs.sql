-- Of the job ids an operator named (`awc retry|cancel|jobs discard ID...`,
-- SPEC §22), those in the states the action applies to: one primary-key
-- lookup each.
SELECT id FROM awc.jobs
WHERE id = ANY(%(ids)s::bigint[]) AND state = ANY(%(states)s::text[])
ORDER BY id
