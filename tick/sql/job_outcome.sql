-- A job's state and, once final, its outcome (SPEC §20: tick.wait, `awc wait`).
SELECT state, result::text, last_error FROM awc.jobs WHERE id = %(id)s
