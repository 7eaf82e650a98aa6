-- Checkpoint (SPEC §17): save each claim's state and progress and extend its
-- lease, as extend_leases.sql does, fenced on (id, claim_token, RUNNING). A
-- claim that matches nothing lost its job, and its state is not saved.
-- Rows by primary key, each finding its values by its position in the arrays
-- (no join to the batch: tests/test_plans.py).
UPDATE ONLY awc.jobs AS j
SET checkpoint = (%(states)s::text[])[array_position(%(ids)s::bigint[], j.id)]::jsonb,
    progress = coalesce((%(progress)s::float8[])[array_position(%(ids)s::bigint[], j.id)],
                        j.progress),
    locked_until = now() + make_interval(
        secs => (%(secs)s::float8[])[array_position(%(ids)s::bigint[], j.id)]),
    updated_at = now()
WHERE j.id = ANY (%(ids)s::bigint[])
  AND j.claim_token = (%(tokens)s::uuid[])[array_position(%(ids)s::bigint[], j.id)]
  AND j.state = 'RUNNING'
RETURNING j.id, extract(epoch FROM j.locked_until - now())::float8
