-- A fan-in settled once per completion statement, not once per parent
-- (SPEC §20, docs/decisions/0033). A completion statement records up to a
-- batch of outcomes; each completed parent used to count its children down
-- by one in a row trigger, so a child of 10,000 parents was updated 10,000
-- times, every flush queueing on its row lock and leaving a dead version of
-- it. A statement trigger on the finished parts now counts the statement's
-- completed parents per child and updates each child once, by that count,
-- under the child's row lock (taken in id order): exactly one statement
-- still takes the count to zero, in the same transaction as its parents'
-- fenced completions. Failures and operator retries keep the row trigger
-- on awc.jobs (rare, and the cascade needs each one).

CREATE FUNCTION awc.settle_completed() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    kids   bigint[];
    counts integer[];
    ready  bigint;
BEGIN
    -- Retention carrying a still-needed parent into the current finished
    -- part (tick/parts.py) re-inserts a job that was settled long ago.
    IF current_setting('awc.carrying', true) = 'on' THEN
        RETURN NULL;
    END IF;
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

DROP TRIGGER jobs_done_0_settle_children ON awc.jobs_done_0;
DROP TRIGGER jobs_done_1_settle_children ON awc.jobs_done_1;
DROP TRIGGER jobs_done_2_settle_children ON awc.jobs_done_2;
DROP TRIGGER jobs_done_3_settle_children ON awc.jobs_done_3;
DROP TRIGGER jobs_done_4_settle_children ON awc.jobs_done_4;
DROP TRIGGER jobs_done_5_settle_children ON awc.jobs_done_5;
DROP TRIGGER jobs_done_6_settle_children ON awc.jobs_done_6;
DROP TRIGGER jobs_done_7_settle_children ON awc.jobs_done_7;

CREATE TRIGGER jobs_done_0_settle AFTER INSERT ON awc.jobs_done_0
    REFERENCING NEW TABLE AS done FOR EACH STATEMENT EXECUTE FUNCTION awc.settle_completed();
CREATE TRIGGER jobs_done_1_settle AFTER INSERT ON awc.jobs_done_1
    REFERENCING NEW TABLE AS done FOR EACH STATEMENT EXECUTE FUNCTION awc.settle_completed();
CREATE TRIGGER jobs_done_2_settle AFTER INSERT ON awc.jobs_done_2
    REFERENCING NEW TABLE AS done FOR EACH STATEMENT EXECUTE FUNCTION awc.settle_completed();
CREATE TRIGGER jobs_done_3_settle AFTER INSERT ON awc.jobs_done_3
    REFERENCING NEW TABLE AS done FOR EACH STATEMENT EXECUTE FUNCTION awc.settle_completed();
CREATE TRIGGER jobs_done_4_settle AFTER INSERT ON awc.jobs_done_4
    REFERENCING NEW TABLE AS done FOR EACH STATEMENT EXECUTE FUNCTION awc.settle_completed();
CREATE TRIGGER jobs_done_5_settle AFTER INSERT ON awc.jobs_done_5
    REFERENCING NEW TABLE AS done FOR EACH STATEMENT EXECUTE FUNCTION awc.settle_completed();
CREATE TRIGGER jobs_done_6_settle AFTER INSERT ON awc.jobs_done_6
    REFERENCING NEW TABLE AS done FOR EACH STATEMENT EXECUTE FUNCTION awc.settle_completed();
CREATE TRIGGER jobs_done_7_settle AFTER INSERT ON awc.jobs_done_7
    REFERENCING NEW TABLE AS done FOR EACH STATEMENT EXECUTE FUNCTION awc.settle_completed();
