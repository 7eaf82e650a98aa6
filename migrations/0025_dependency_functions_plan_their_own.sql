-- The dependency functions plan their statements for themselves (SPEC §20,
-- docs/decisions/0033). The engine pins its queue statements' plans for
-- its transaction (tick/sql/pin_plans.sql: no hash or merge join, no
-- materialize, no sort, generic plans), which is right for a claim or a
-- fenced write and wrong for these functions' set-wise joins: under those
-- settings, with statistics taken when the table held few waiting children,
-- the completion of a parent with 10,000 children joined them to its
-- unnest() by a nested loop that rescanned the array once per child (100M
-- rows compared, 15 s in one completion), and the failure of such a parent
-- cascaded in 40 s instead of 0.15 s.
--
-- * awc.settle_completed, called by every completion of a parent, joins
--   nothing any more: it counts children down by key (`id = ANY`), grouped
--   by how many of their parents the statement completed, so any plan of it
--   is linear, and a generic one is as good as a custom one (a chain of
--   jobs calls it once per job: planning it each time would cost that).
-- * The rare paths, a parent's failure or retry (awc.settle_children,
--   awc.count_waiting) and a declaration in plain SQL (awc.declare_parents),
--   set for their own duration the planner's defaults and a plan made for
--   the call's values (an array's length is then known); the caller's
--   settings come back when they return. JIT stays off, for the pin's reason.
-- The children a settle counts down are stamped by it (the transaction that
-- made them ready, SPEC §24) rather than by the row trigger, which a
-- statement that stamps a row itself now skips: a fan-out's 10,000 children
-- were 10,000 calls of a PL/pgSQL function inside the parent's completion.
DROP TRIGGER jobs_ready_xid ON awc.jobs;
CREATE TRIGGER jobs_ready_xid BEFORE UPDATE ON awc.jobs
    FOR EACH ROW WHEN (NEW.state = 'PENDING' AND NEW.ready_xid IS DISTINCT FROM pg_current_xact_id())
    EXECUTE FUNCTION awc.stamp_ready_xid();

CREATE OR REPLACE FUNCTION awc.settle_completed(parents bigint[], waited bigint[]) RETURNS bigint
    LANGUAGE plpgsql
    -- Every statement below finds its rows by key; the children's walk in id
    -- order is what locks them in id order.
    SET enable_seqscan = off SET enable_bitmapscan = off
    AS $$
DECLARE
    kids   bigint[];
    counts integer[];
    most   integer;
    n      integer;
    batch  bigint[];
    got    bigint;
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
    SELECT array_agg(c.child_id ORDER BY c.child_id), array_agg(c.n ORDER BY c.child_id),
           max(c.n)
    INTO kids, counts, most
    FROM (SELECT e.child_id, count(*)::integer AS n
          FROM awc.job_parents AS e
          WHERE e.parent_id = ANY (parents)
          GROUP BY e.child_id) AS c;
    IF kids IS NULL THEN
        RETURN 0;
    END IF;
    -- Children are locked in id order, so two completions that share
    -- children queue instead of deadlocking, and each counts down under the
    -- child's lock. No statement joins the children to a list of them: a
    -- join's plan depends on estimates a queue's statistics get wrong, and
    -- one such plan compared every child with every other (decision 0033).
    IF most = 1 THEN
        -- The usual case (a fan-out, or one parent of a fan-in): one walk of
        -- the children in id order locks and counts each down.
        WITH counted AS (
            UPDATE ONLY awc.jobs AS c
            SET waiting = c.waiting - 1, ready_xid = pg_current_xact_id()
            WHERE c.id = ANY (kids) AND c.state = 'PENDING' AND c.waiting > 0
            RETURNING c.waiting)
        SELECT count(*) INTO ready FROM counted WHERE counted.waiting = 0;
    ELSE
        PERFORM 1 FROM ONLY awc.jobs AS c WHERE c.id = ANY (kids) ORDER BY c.id FOR UPDATE;
        FOR n, batch IN
            SELECT k.n, array_agg(k.id) FROM unnest(kids, counts) AS k (id, n) GROUP BY k.n
        LOOP
            WITH counted AS (
                UPDATE ONLY awc.jobs AS c
                SET waiting = c.waiting - least(n, c.waiting), ready_xid = pg_current_xact_id()
                WHERE c.id = ANY (batch) AND c.state = 'PENDING' AND c.waiting > 0
                RETURNING c.waiting)
            SELECT count(*) INTO got FROM counted WHERE counted.waiting = 0;
            ready := ready + got;
        END LOOP;
    END IF;
    IF ready > 0 THEN
        PERFORM pg_notify('awc_jobs', '');  -- a waiting loop wakes for the child
    END IF;
    RETURN ready;
END;
$$;

ALTER FUNCTION awc.settle_children()
    SET enable_seqscan = on SET enable_bitmapscan = on SET enable_sort = on
    SET enable_hashjoin = on SET enable_mergejoin = on SET enable_material = on
    SET plan_cache_mode = force_custom_plan SET jit = off;
ALTER FUNCTION awc.count_waiting()
    SET enable_seqscan = on SET enable_bitmapscan = on SET enable_sort = on
    SET enable_hashjoin = on SET enable_mergejoin = on SET enable_material = on
    SET plan_cache_mode = force_custom_plan SET jit = off;
ALTER FUNCTION awc.declare_parents(bigint, bigint[], text)
    SET enable_seqscan = on SET enable_bitmapscan = on SET enable_sort = on
    SET enable_hashjoin = on SET enable_mergejoin = on SET enable_material = on
    SET plan_cache_mode = force_custom_plan SET jit = off;
