-- A failure, and an operator's retry, counted by edge (SPEC §20,
-- docs/decisions/0033).
--
-- A parent's failure counted its children down with `e.parent_id = ANY
-- (failed)` over each child's edges, a filter in the generic plan: every
-- parent of a fan-in that failed read all of the child's edges (10,000
-- failing parents of one `run` child: 18 s, against 1.6 s without the
-- child), and so did an operator's retry of each. A level of a few parents
-- now probes each edge by both keys.
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
        IF NOT counted AND cardinality(revived) <= 64 THEN
            -- Each edge by both keys (awc.settle_children says why).
            UPDATE awc.jobs AS c
            SET waiting = c.waiting + (SELECT count(*) FROM unnest(revived) AS r (parent_id)
                                       WHERE (SELECT true FROM awc.job_parents AS e
                                              WHERE e.child_id = c.id
                                                AND e.parent_id = r.parent_id))::integer
            WHERE c.id = ANY (kids) AND c.state = 'PENDING';
        ELSIF NOT counted THEN
            UPDATE awc.jobs AS c
            SET waiting = c.waiting + (SELECT count(*) FROM awc.job_parents AS e
                                       WHERE e.child_id = c.id
                                         AND e.parent_id = ANY (revived))::integer
            WHERE c.id = ANY (kids) AND c.state = 'PENDING';
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
              AND c.state = 'PENDING' AND c.waiting > 0
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
                    WHERE c.id = ANY (kids) AND c.state = 'PENDING' AND c.waiting > 0
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
                    WHERE c.id = ANY (kids) AND c.state = 'PENDING' AND c.waiting > 0
                    RETURNING c.waiting)
                SELECT ready + count(*) INTO ready FROM counted WHERE counted.waiting = 0;
            END IF;
            failed := doomed;
        END LOOP;
        PERFORM set_config('awc.cascading', '', true);
    ELSE
        -- An operator retry of a failed or cancelled parent: its PENDING
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
