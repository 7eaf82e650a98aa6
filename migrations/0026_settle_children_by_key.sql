-- A parent's failure, and an operator's retry of it, settle its
-- descendants level by level, finding every row by key (SPEC §20,
-- docs/decisions/0033): no plan rests on the table's statistics.
--
-- The failure cancelled its descendants with one recursive join. Planned on
-- a table not analyzed since a graph was enqueued, it hashed the whole
-- graph at every level: the failure of the head of a chain of 10,000 ran
-- past the statement timeout, so it could not be recorded at all (a chain
-- of 5,000 on an analyzed table: 0.07 s). Each level now finds the children
-- of the jobs failed or cancelled at the level before by key, cancels those
-- that cancel and counts the others down.
--
-- The retry found each level's children among the cancelled jobs by a
-- semi-join the planner answered from an index of finished jobs, filtering
-- the ids, so every level read the cancelled jobs still left: a chain of
-- 5,000 took 24 s to revive, growing with the square of its length. The
-- children are now looked up by key (`id = ANY`), as the completion's
-- settle does. A `run` child that was ready because its parent had failed
-- (its count at 0) now waits for the retried parent again: the revive
-- counted again only the children still waiting, so a batch's callback
-- could run before the parent it waits for had run again. (A retry of
-- several related jobs in one statement is counted once more by the
-- caller: tick/sql/recount_waiting.sql.)
--
-- With every row found by key, both functions plan as the settle does
-- (`awc.settle_completed`): index scans only, and one generic plan a
-- statement, kept for every call and level. Migration 0025 had them plan
-- every statement for its values: a chain's retry spent four fifths of its
-- time planning (1.8 of 2.2 s for a chain of 2,000). Left to the session's
-- choice, an operator's session planned every level once the table held a
-- few thousand rows (a generic plan's estimate looked worse). JIT stays
-- off: with sequential scans off every cost is inflated.
-- The descendants of the revived jobs (SPEC §20: an operator's retry), level
-- by level so a child's other parents are settled first: the PENDING
-- children of each level count its jobs unfinished again (a `run` child
-- already ready too: its parent had failed), and those the failure
-- cancelled that no parent holds failed any more wait again, the next
-- level. Every row by key. `counted`: the caller counts the first level's
-- children itself afterwards (recount_waiting.sql), so they are not raised
-- here, once a child per revived parent.
CREATE FUNCTION awc.revive_descendants(revived bigint[], counted boolean DEFAULT false)
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
        IF NOT counted THEN
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
            -- by walking the finished jobs' index (every cancelled job, each
            -- level: a chain of 10,000 took 7.8 s) when a plan prefers it.
            WHERE c.id = ANY (kids)
              AND c.state || '' = 'CANCELLED' AND c.last_error LIKE 'ParentFailed:%'
              AND NOT EXISTS (
                  SELECT 1 FROM awc.job_parents AS e JOIN awc.jobs AS p ON p.id = e.parent_id
                  WHERE e.child_id = c.id AND p.state IN ('FAILED', 'CANCELLED'))
            RETURNING c.id)
        SELECT coalesce(array_agg(id), '{}') INTO revived FROM back;
    END LOOP;
    PERFORM set_config('awc.cascading', before, true);
END;
$$;

CREATE OR REPLACE FUNCTION awc.settle_children() RETURNS trigger
    LANGUAGE plpgsql
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
            WITH counted AS (
                UPDATE awc.jobs AS c
                SET waiting = c.waiting - least(
                        (SELECT count(*) FROM awc.job_parents AS e
                         WHERE e.child_id = c.id AND e.parent_id = ANY (failed)),
                        c.waiting)::integer
                WHERE c.id = ANY (kids) AND c.state = 'PENDING' AND c.waiting > 0
                RETURNING c.waiting)
            SELECT ready + count(*) INTO ready FROM counted WHERE counted.waiting = 0;
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

ALTER FUNCTION awc.count_waiting() RESET ALL;
ALTER FUNCTION awc.count_waiting() SET enable_seqscan = off SET enable_bitmapscan = off
    SET plan_cache_mode = force_generic_plan SET jit = off;
