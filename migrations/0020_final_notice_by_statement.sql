-- A completion statement tells waiters once, not once per job (SPEC §20,
-- docs/decisions/0033). The finished parts sent `awc_final` from a row
-- trigger, one notification per completed job whether anyone waited or
-- not: about a tenth of a 256-job completion statement's time. The parts'
-- statement trigger now sends one per statement, the completed ids joined
-- by commas (an empty payload when they would not fit: every waiter looks
-- again). Failures and cancels, on awc.jobs, still notify per job.
CREATE OR REPLACE FUNCTION awc.settle_completed() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    kids   bigint[];
    counts integer[];
    ready  bigint;
    ids    text;
BEGIN
    -- Retention carrying a still-needed parent into the current finished
    -- part (tick/parts.py) re-inserts a job that was settled long ago.
    IF current_setting('awc.carrying', true) = 'on' THEN
        RETURN NULL;
    END IF;
    -- A producer waiting for an outcome (tick.wait, `awc wait`) hears of the
    -- statement's completed jobs in one notification, their ids joined by
    -- commas; a list longer than a payload holds is sent empty, which tells
    -- every waiter to look again. One per statement, not one per job: the
    -- completion is on the hot path.
    SELECT string_agg(d.id::text, ',') INTO ids FROM done AS d;
    IF ids IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM pg_notify('awc_final', CASE WHEN length(ids) <= 7900 THEN ids ELSE '' END);
    SELECT array_agg(c.child_id ORDER BY c.child_id), array_agg(c.n ORDER BY c.child_id)
    INTO kids, counts
    FROM (SELECT e.child_id, count(*)::integer AS n
          FROM done AS d JOIN awc.job_parents AS e ON e.parent_id = d.id
          WHERE d.has_children
          GROUP BY e.child_id) AS c;
    IF kids IS NULL THEN
        RETURN NULL;  -- no completed job of this statement has a child
    END IF;
    -- Locked in id order, so two completions that share children queue
    -- instead of deadlocking; each then counts down under the child's lock.
    PERFORM 1 FROM ONLY awc.jobs AS c WHERE c.id = ANY (kids) ORDER BY c.id FOR UPDATE;
    WITH counted AS (
        UPDATE ONLY awc.jobs AS c
        SET waiting = c.waiting - least(k.n, c.waiting)
        FROM unnest(kids, counts) AS k (id, n)
        WHERE c.id = k.id AND c.state = 'PENDING' AND c.waiting > 0
        RETURNING c.waiting)
    SELECT count(*) INTO ready FROM counted WHERE counted.waiting = 0;
    IF ready > 0 THEN
        PERFORM pg_notify('awc_jobs', '');  -- a waiting loop wakes for the child
    END IF;
    RETURN NULL;
END;
$$;

DROP TRIGGER jobs_done_0_notify_final ON awc.jobs_done_0;
DROP TRIGGER jobs_done_1_notify_final ON awc.jobs_done_1;
DROP TRIGGER jobs_done_2_notify_final ON awc.jobs_done_2;
DROP TRIGGER jobs_done_3_notify_final ON awc.jobs_done_3;
DROP TRIGGER jobs_done_4_notify_final ON awc.jobs_done_4;
DROP TRIGGER jobs_done_5_notify_final ON awc.jobs_done_5;
DROP TRIGGER jobs_done_6_notify_final ON awc.jobs_done_6;
DROP TRIGGER jobs_done_7_notify_final ON awc.jobs_done_7;
