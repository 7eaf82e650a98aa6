-- Record Retry outcomes (SPEC §5), fenced: back to PENDING after the backoff
-- delay chosen by the worker, or FAILED (dead letter) once attempts are spent.
-- Each row also gains an entry in its error history (SPEC §22), with the
-- handler's traceback where there was an exception (null: none).
-- The batch's rows are taken by primary key (id = ANY) and each finds its own
-- token, error and delay by its position in the arrays: with no join to the
-- batch, no plan can walk the RUNNING rows once per batch entry
-- (tests/test_plans.py).
-- The claim's token stays on the row: an outcome sent again after its answer
-- was lost with the connection is refused by the fence, and lost_claims.sql
-- reads by the token that the outcome recorded was this holder's own.
UPDATE ONLY awc.jobs AS j
SET state = CASE WHEN j.attempts >= j.max_attempts THEN 'FAILED' ELSE 'PENDING' END,
    run_at = CASE WHEN j.attempts >= j.max_attempts THEN j.run_at
                  ELSE now() + make_interval(
                      secs => (%(delays)s::float8[])[array_position(%(ids)s::bigint[], j.id)])
             END,
    finished_at = CASE WHEN j.attempts >= j.max_attempts THEN now() END,
    last_error = (%(errors)s::text[])[array_position(%(ids)s::bigint[], j.id)],
    -- SPEC §22: this failed run joins the job's error history, the 20 newest kept.
    errors = jsonb_path_query_array(
        j.errors || jsonb_build_array(jsonb_strip_nulls(jsonb_build_object(
            'attempt', j.attempts,
            'at', now(),
            'error', (%(errors)s::text[])[array_position(%(ids)s::bigint[], j.id)],
            'traceback', (%(tracebacks)s::text[])[array_position(%(ids)s::bigint[], j.id)]))),
        '$[last - 19 to last]'),
    locked_by = NULL,
    locked_until = NULL,
    updated_at = now()
WHERE j.id = ANY (%(ids)s::bigint[])
  AND j.claim_token = (%(tokens)s::uuid[])[array_position(%(ids)s::bigint[], j.id)]
  AND j.state = 'RUNNING'
RETURNING j.id, j.state
