-- A child that runs while an operator retries its parent waits for it again
-- (SPEC §20, docs/decisions/0033).
--
-- An operator's retry of a failed parent raised the count of its PENDING
-- children only. A `run` child already RUNNING (it started because the
-- parent had failed) kept `waiting = 0`, so when its run ended in a retry
-- (or a rescue, a release, a Continue) it was PENDING and claimable at once,
-- and ran to completion while the revived parent was still PENDING. The
-- revival now raises a RUNNING child's count too, and a parent's final
-- outcome counts RUNNING children down as it does PENDING ones, each under
-- the child's row lock as before.

CREATE OR REPLACE FUNCTION awc.revive_descendants(revived bigint[], counted boolean DEFAULT false)
    RETURNS void
    LANGUAGE plpgsql
    SET enable_seqscan = off SET enable_bitmapscan = off
    SET plan_cache_mode = force_generic_plan SET jit = off
    AS $$
DECLARE
    kids   bigint[];
    before text := coalesce(current_setting('awc.cascading', true), '');
BEGIN
    -- Its own updates settle nothing again (awc.settle_children).
    PERFORM set_config('awc.cascading', 'on', true);
    WHILE cardinality(revived) > 0 LOOP
        kids := ARRAY(SELECT DISTINCT e.child_id FROM awc.job_parents AS e
                      WHERE e.parent_id = ANY (revived));
        -- A child still RUNNING counts too (migration 0032): a `run` child
        -- started after its parent failed, and one whose run ends in a
        -- retry, a rescue, a release or a Continue is PENDING again and must
        -- wait for the revived parent, not be claimed at once.
        IF NOT counted AND cardinality(revived) <= 64 THEN
            -- Each edge by both keys (awc.settle_children says why).
            UPDATE awc.jobs AS c
            SET waiting = c.waiting + (SELECT count(*) FROM unnest(revived) AS r (parent_id)
                                       WHERE (SELECT true FROM awc.job_parents AS e
                                              WHERE e.child_id = c.id
                                                AND e.parent_id = r.parent_id))::integer
            WHERE c.id = ANY (kids) AND c.state IN ('PENDING', 'RUNNING');
        ELSIF NOT counted THEN
            UPDATE awc.jobs AS c
            SET waiting = c.waiting + (SELECT count(*) FROM awc.job_parents AS e
                                       WHERE e.child_id = c.id
                                         AND e.parent_id = ANY (revived))::integer
            WHERE c.id = ANY (kids) AND c.state IN ('PENDING', 'RUNNING');
        END IF;
        counted := false;
        WITH back AS (
            UPDATE awc.jobs AS c
            SET state = 'PENDING', finished_at = NULL, updated_at = now()
            -- `state || ''`, not `state =`: an expression no partial index's
            -- predicate follows from, so the jobs are found by key, never
            -- by walking the finished jobs' index.
            WHERE c.id = ANY (kids)
              AND c.state || '' = 'CANCELLED' AND c.last_error LIKE 'ParentFailed:%'
              -- A scalar subquery, run per child by key: a NOT EXISTS here
              -- became an anti-join over every failed job, each level.
              AND (SELECT count(*) FROM awc.job_parents AS e
                   JOIN ONLY awc.jobs AS p ON p.id = e.parent_id
                   WHERE e.child_id = c.id AND p.state || '' IN ('FAILED', 'CANCELLED')) = 0
            RETURNING c.id)
        SELECT coalesce(array_agg(id), '{}') INTO revived FROM back;
    END LOOP;
    PERFORM set_config('awc.cascading', before, true);
END;
$$;

CREATE OR REPLACE FUNCTION awc.settle_children() RETURNS trigger
    LANGUAGE plpgsql
    -- Every row by key, one generic plan a statement (migration 0026).
    SET enable_seqscan = off SET enable_bitmapscan = off
    SET plan_cache_mode = force_generic_plan SET jit = off
    AS $$
DECLARE
    ready   bigint;
    failed  bigint[];
    doomed  bigint[];
    kids    bigint[];
BEGIN
    -- The cascade's own updates below: the statement that made them has
    -- already settled their children.
    IF current_setting('awc.cascading', true) = 'on' THEN
        RETURN NULL;
    END IF;
    -- Retention carrying a still-needed parent into the current finished
    -- part (tick/parts.py) re-inserts a job that was settled long ago.
    IF TG_OP = 'INSERT' AND current_setting('awc.carrying', true) = 'on' THEN
        RETURN NULL;
    END IF;
    IF NEW.state = 'COMPLETED' THEN
        -- Walked in job_parents_parent_idx's order, so children are locked
        -- by ascending id, the same order for every parent.
        WITH counted AS (
            UPDATE awc.jobs AS c
            SET waiting = c.waiting - 1
            FROM awc.job_parents AS e
            WHERE e.parent_id = NEW.id AND c.id = e.child_id
              AND c.state IN ('PENDING', 'RUNNING') AND c.waiting > 0
            RETURNING c.waiting)
        SELECT count(*) INTO ready FROM counted WHERE counted.waiting = 0;
    ELSIF NEW.state IN ('FAILED', 'CANCELLED') THEN
        PERFORM set_config('awc.cascading', 'on', true);
        -- Every descendant that cancels on a parent's failure, down the
        -- graph, level by level; the others ("run") count one final parent
        -- more for each of theirs that failed or was cancelled. Every row
        -- is found by key (`= ANY`), never by a join whose plan rests on
        -- the table's statistics: a recursive join planned on a table
        -- never analyzed hashed the whole graph at every level, and a chain
        -- of 10,000 went past the statement timeout (the failure could not
        -- be recorded).
        ready := 0;
        failed := ARRAY[NEW.id];
        WHILE cardinality(failed) > 0 LOOP
            kids := ARRAY(SELECT DISTINCT e.child_id FROM awc.job_parents AS e
                          WHERE e.parent_id = ANY (failed));
            WITH cancelled AS (
                UPDATE awc.jobs AS c
                SET state = 'CANCELLED',
                    last_error = (SELECT 'ParentFailed: parent job ' || min(e.parent_id)
                                         || ' ended ' || CASE WHEN min(e.parent_id) = NEW.id
                                                             THEN NEW.state ELSE 'CANCELLED' END
                                  FROM awc.job_parents AS e
                                  WHERE e.child_id = c.id AND e.parent_id = ANY (failed)),
                    finished_at = now(),
                    updated_at = now()
                WHERE c.id = ANY (kids) AND c.state = 'PENDING' AND c.waiting > 0
                  AND c.on_parent_failure = 'cancel'
                RETURNING c.id)
            SELECT coalesce(array_agg(id), '{}') INTO doomed FROM cancelled;
            IF cardinality(failed) <= 64 THEN
                -- A few failed parents (a row's own, as a rule): each edge
                -- probed by both its keys, a subquery per parent that no
                -- plan can turn into a join. `e.parent_id = ANY (failed)`
                -- below is a filter on the child's edges in the generic
                -- plan: each parent of a fan-in failing read every edge of
                -- the child, 10,000 parents failing took 18 s (1.6 s with
                -- no child).
                WITH counted AS (
                    UPDATE awc.jobs AS c
                    SET waiting = c.waiting - least(
                            (SELECT count(*) FROM unnest(failed) AS f (parent_id)
                             WHERE (SELECT true FROM awc.job_parents AS e
                                    WHERE e.child_id = c.id AND e.parent_id = f.parent_id)),
                            c.waiting)::integer
                    WHERE c.id = ANY (kids) AND c.state IN ('PENDING', 'RUNNING')
                      AND c.waiting > 0
                    RETURNING c.waiting)
                SELECT ready + count(*) INTO ready FROM counted WHERE counted.waiting = 0;
            ELSE
                -- A level of many (a fan-out's cascade): each child's own edges.
                WITH counted AS (
                    UPDATE awc.jobs AS c
                    SET waiting = c.waiting - least(
                            (SELECT count(*) FROM awc.job_parents AS e
                             WHERE e.child_id = c.id AND e.parent_id = ANY (failed)),
                            c.waiting)::integer
                    WHERE c.id = ANY (kids) AND c.state IN ('PENDING', 'RUNNING')
                      AND c.waiting > 0
                    RETURNING c.waiting)
                SELECT ready + count(*) INTO ready FROM counted WHERE counted.waiting = 0;
            END IF;
            failed := doomed;
        END LOOP;
        PERFORM set_config('awc.cascading', '', true);
    ELSE
        -- An operator retry of a failed or cancelled parent: its PENDING (and RUNNING)
        -- children count it unfinished again, and the descendants its
        -- failure cancelled wait again (awc.revive_descendants). A caller
        -- that revives many jobs in one statement (tick.bulk) says so, and
        -- revives the descendants of all of them at once after it: one
        -- trigger a parent would raise a fan-in child's count once each,
        -- a row update of the same row per parent (decision 0033).
        IF current_setting('awc.reviving', true) = 'on' THEN
            RETURN NULL;
        END IF;
        PERFORM awc.revive_descendants(ARRAY[NEW.id]);
        ready := 0;
    END IF;
    IF ready > 0 THEN
        PERFORM pg_notify('awc_jobs', '');  -- a waiting loop wakes for the child
    END IF;
    RETURN NULL;
END;
$$;

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
