-- SPEC §23 under a kind or queue limit (docs/decisions/0034, amended
-- 2026-12-06, late): the lane claim (claim_limited_jobs.sql) takes each lane's
-- jobs round-robin across keys, as the fair claim does across a priority.
-- The lane index gains the key between the lane and the claim order, so
-- within a lane each key's ready jobs are one range and the keys are in
-- order for a walk of one probe per key. The same entries as before (one
-- per ready job, '' for a job without a key): an enqueue writes no more.
-- Within a key, run_at still orders the entries, so a key's ready jobs come
-- before its scheduled ones.
DROP INDEX awc.jobs_ready_lane_idx;
CREATE INDEX jobs_ready_lane_idx ON awc.jobs (kind, queue, priority, (coalesce(key, '')), run_at, id)
    WHERE state = 'PENDING' AND waiting = 0;

-- The next key cursors after a claim that served keys up to `k` at the
-- priority `p` (its negation, as the claims order by it), from `cursors`
-- (the claimer's, a JSON object of one key per priority, "*" for a cursor
-- kept from before they were per priority, "~" the priorities served, the
-- latest first): that priority's cursor set to `k`, put first in "~", and
-- at most 64 priorities kept, the most recently served, so a producer
-- inventing priorities cannot grow the object and a busy priority's place
-- in its rotation is never the one dropped. Served again at the priority
-- served last (the usual case), only its key changes. One definition for
-- the claims that rotate across keys (claim_keyed_jobs.sql and
-- claim_limited_jobs.sql).
CREATE FUNCTION awc.key_turn(cursors jsonb, p integer, k text) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT CASE WHEN cursors -> '~' ->> 0 = p::text
                    THEN cursors || jsonb_build_object(p::text, k)
                ELSE coalesce((SELECT jsonb_object_agg(e.key, e.value)
                               FROM jsonb_each(cursors) AS e
                               WHERE e.key = '*' OR e.key IN (
                                   SELECT o.v
                                   FROM jsonb_array_elements_text(cursors -> '~')
                                        WITH ORDINALITY AS o (v, n)
                                   WHERE o.v <> p::text ORDER BY o.n LIMIT 63)), '{}')
                     || jsonb_build_object(p::text, k, '~', jsonb_build_array(p::text)
                            || coalesce((SELECT jsonb_agg(o.v ORDER BY o.n) FROM (
                                             SELECT o.v, o.n
                                             FROM jsonb_array_elements_text(cursors -> '~')
                                                  WITH ORDINALITY AS o (v, n)
                                             WHERE o.v <> p::text ORDER BY o.n LIMIT 63) AS o),
                                        '[]'))
           END
$$;
