-- Record Complete outcomes (SPEC §4.2, §5), fenced: a row is written only if
-- this claim still holds it. A job cancelled, rescued or re-claimed meanwhile
-- matches nothing and its outcome is discarded.
-- The batch's rows are taken by primary key (id = ANY) and each finds its own
-- token and result by its position in the arrays: with no join to the batch, no
-- plan can walk the RUNNING rows once per batch entry (tests/test_plans.py).
UPDATE awc.jobs AS j
SET state = 'COMPLETED',
    result = (%(results)s::jsonb[])[array_position(%(ids)s::bigint[], j.id)],
    locked_by = NULL,
    locked_until = NULL,
    claim_token = NULL,
    finished_at = now(),
    updated_at = now()
WHERE j.id = ANY (%(ids)s::bigint[])
  AND j.claim_token = (%(tokens)s::uuid[])[array_position(%(ids)s::bigint[], j.id)]
  AND j.state = 'RUNNING'
RETURNING j.id, j.state
