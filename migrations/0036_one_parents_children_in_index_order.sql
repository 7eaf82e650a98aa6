-- A completion of one parent reads its children straight from the index
-- (SPEC §20, docs/decisions/0033, "One parent's children in index order").
--
-- awc.settle_completed grouped the completed parents' edges by child to
-- count each child down once by how many of its parents completed. With one
-- parent every child is counted once (job_parents' key is (child_id,
-- parent_id)), and the grouping was a hash of every edge and two sorts of
-- the children: for a fan-out of 10,000, 17 ms of the parent's completion
-- (a tenth of what the children's release costs beside it). A chain, and a
-- tick completing one job, call it with one parent too. The children now
-- come in id order from job_parents_parent_idx, the order that locks them.

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
    IF cardinality(parents) = 1 THEN
        -- One parent (a fan-out's, a chain's link, a tick's one outcome):
        -- each of its children once, in id order as job_parents_parent_idx
        -- holds them, with no grouping or sort (migration 0036).
        kids := ARRAY(SELECT e.child_id FROM awc.job_parents AS e
                      WHERE e.parent_id = parents[1] ORDER BY e.child_id);
        most := 1;
        IF cardinality(kids) = 0 THEN
            RETURN 0;
        END IF;
    ELSE
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
    END IF;
    -- A RUNNING child counts too: an operator's retry of its parent raised
    -- its count while it ran (awc.revive_descendants, migration 0032).
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
            WHERE c.id = ANY (kids) AND c.state IN ('PENDING', 'RUNNING') AND c.waiting > 0
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
                WHERE c.id = ANY (batch) AND c.state IN ('PENDING', 'RUNNING')
                  AND c.waiting > 0
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
