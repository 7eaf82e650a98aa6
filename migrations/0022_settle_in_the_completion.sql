-- Jobs without dependencies pay nothing for them when they complete (SPEC
-- §20, docs/decisions/0033). Since migration 0018 every completion
-- statement fired a statement trigger with a transition table on each of
-- the eight finished parts (seven of them empty): each captured the
-- statement's rows, ran a function, and sent `awc_final` whether anyone
-- waited or not. The completion (tick/sql/complete_jobs.sql) now calls
-- awc.settle_completed itself, once, and only when one of its completed
-- jobs has a child or a waiter; a statement of jobs with neither calls
-- nothing and sends nothing.
--
-- * `waited` marks a job a producer waits for (tick.wait, `awc wait`). The
--   waiter sets it before it reads the job, on the job's row: a completion
--   that deletes the row after the mark reads it marked (READ COMMITTED
--   re-reads an updated row), and one that deleted it first makes the
--   mark wait for its commit and find nothing, and the waiter's read finds
--   the outcome. Failures and cancels still notify every time (a row
--   trigger on awc.jobs, rare and not on the hot path).
-- * The function's statements take their own snapshots, as the trigger's
--   did: a producer that locked a parent (lock_parents.sql) before the
--   completion could delete it committed its edges before this runs, and
--   they are seen.
ALTER TABLE awc.jobs ADD COLUMN waited boolean NOT NULL DEFAULT false;

DROP TRIGGER jobs_done_0_settle ON awc.jobs_done_0;
DROP TRIGGER jobs_done_1_settle ON awc.jobs_done_1;
DROP TRIGGER jobs_done_2_settle ON awc.jobs_done_2;
DROP TRIGGER jobs_done_3_settle ON awc.jobs_done_3;
DROP TRIGGER jobs_done_4_settle ON awc.jobs_done_4;
DROP TRIGGER jobs_done_5_settle ON awc.jobs_done_5;
DROP TRIGGER jobs_done_6_settle ON awc.jobs_done_6;
DROP TRIGGER jobs_done_7_settle ON awc.jobs_done_7;
DROP FUNCTION awc.settle_completed();

CREATE FUNCTION awc.settle_completed(parents bigint[], waited bigint[]) RETURNS bigint
    LANGUAGE plpgsql AS $$
DECLARE
    kids   bigint[];
    counts integer[];
    ready  bigint := 0;
    ids    text;
BEGIN
    -- A producer waiting for an outcome hears of the statement's completed
    -- jobs it waits for in one notification, their ids joined by commas; a
    -- list longer than a payload holds is sent empty (every waiter looks).
    IF cardinality(waited) > 0 THEN
        ids := array_to_string(waited, ',');
        PERFORM pg_notify('awc_final', CASE WHEN length(ids) <= 7900 THEN ids ELSE '' END);
    END IF;
    IF coalesce(cardinality(parents), 0) = 0 THEN
        RETURN 0;
    END IF;
    -- Each child counted down once, by how many of its parents completed.
    SELECT array_agg(c.child_id ORDER BY c.child_id), array_agg(c.n ORDER BY c.child_id)
    INTO kids, counts
    FROM (SELECT e.child_id, count(*)::integer AS n
          FROM awc.job_parents AS e
          WHERE e.parent_id = ANY (parents)
          GROUP BY e.child_id) AS c;
    IF kids IS NULL THEN
        RETURN 0;
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
    RETURN ready;
END;
$$;
