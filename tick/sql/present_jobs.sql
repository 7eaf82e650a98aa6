-- Which of these jobs exist (SPEC §20), unlocked: read to name the parent
-- missing from a refused enqueue, whose lock_parents locked none.
SELECT id FROM awc.jobs WHERE id = ANY (%(ids)s::bigint[])
