-- Dependencies declared in plain SQL, and an operator's retry of a chain
-- (SPEC §20, docs/decisions/0033).
--
-- awc.declare_parents took any PENDING job as the child, so a job committed
-- long ago could be given parents after the fact, and a cycle built: B
-- after A in one transaction, A after B in the next, and both waited for
-- ever. The child must now be this transaction's own (inserted by it, so no
-- other transaction can name it or claim it yet), and none of its parents
-- may be among its descendants (declared in this same transaction).
-- A parent a tick completed while the lock waited for it (its row moved to a
-- finished part, which the locking statement's snapshot cannot see) was
-- called missing: it is now read again by a statement of its own.
--
-- awc.revive_descendants tested each cancelled child for a parent still
-- failed with a NOT EXISTS the planner answered by reading every FAILED and
-- CANCELLED job, at every level: the retry of a chain's head grew with the
-- square of its length (3,000: 4.8 s; 20,000: past the statement timeout,
-- so it could not be retried at all). The test is now a subquery per child,
-- by key (its edges, then each parent by id), which no plan can turn into a
-- walk of the failed jobs; FAILED and CANCELLED jobs live in the hot table
-- only (the finished parts hold COMPLETED rows).
CREATE OR REPLACE FUNCTION awc.declare_parents(child bigint, parents bigint[],
                                               on_parent_failure text DEFAULT 'cancel')
    RETURNS integer
    LANGUAGE plpgsql
    SET enable_seqscan = on SET enable_bitmapscan = on SET enable_sort = on
    SET enable_hashjoin = on SET enable_mergejoin = on SET enable_material = on
    SET plan_cache_mode = force_custom_plan SET jit = off
    AS $$
DECLARE
    locked  bigint[];
    missing bigint;
    failed  text;
    unfinished integer;
    inserter xid;
    own8    numeric;
    whole   numeric;
BEGIN
    IF declare_parents.on_parent_failure IS NULL
       OR declare_parents.on_parent_failure NOT IN ('cancel', 'run') THEN
        RAISE EXCEPTION 'on_parent_failure must be ''cancel'' or ''run'''
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cardinality(ARRAY(SELECT DISTINCT p FROM unnest(parents) AS p)) > 10000 THEN
        RAISE EXCEPTION 'after names more than 10000 parents'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The child's row is this transaction's: it sees the row, and the
    -- transaction that wrote it is still in progress (another's uncommitted
    -- row is invisible). Its 32-bit xmin is widened to a full id: the one
    -- nearest this transaction's own (both are recent).
    SELECT j.xmin INTO inserter FROM awc.jobs AS j WHERE j.id = child AND j.state = 'PENDING';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job % is not a PENDING job', child
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    own8 := pg_current_xact_id()::text::numeric;
    whole := own8 - mod(own8, 4294967296) + inserter::text::numeric;
    IF whole - own8 > 2147483648 THEN
        whole := whole - 4294967296;
    ELSIF own8 - whole > 2147483648 THEN
        whole := whole + 4294967296;
    END IF;
    IF whole < 3 OR pg_xact_status(whole::text::xid8) IS DISTINCT FROM 'in progress' THEN
        RAISE EXCEPTION 'job % was not inserted by this transaction: declare its parents '
                        'in the transaction that inserts it, before it commits', child
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    locked := ARRAY(SELECT j.id FROM awc.jobs AS j WHERE j.id = ANY (parents)
                   ORDER BY j.id FOR NO KEY UPDATE);
    IF EXISTS (SELECT 1 FROM unnest(parents) AS p WHERE p <> ALL (locked)) THEN
        -- Moved to a finished part while the lock waited: a fresh snapshot sees it there.
        locked := locked || ARRAY(SELECT j.id FROM awc.jobs AS j
                                  WHERE j.id = ANY (parents) AND j.id <> ALL (locked)
                                  ORDER BY j.id FOR NO KEY UPDATE);
    END IF;
    SELECT p INTO missing FROM unnest(parents) AS p WHERE p <> ALL (locked) OR p = child LIMIT 1;
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'after names job %, which does not exist or is the child', missing
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    -- Its descendants were declared in this transaction too (the child is
    -- its own): a parent among them would close a cycle.
    SELECT d.id INTO missing
    FROM (WITH RECURSIVE below (id) AS (
              SELECT e.child_id FROM awc.job_parents AS e WHERE e.parent_id = child
              UNION
              SELECT e.child_id FROM awc.job_parents AS e JOIN below AS b ON e.parent_id = b.id)
          SELECT id FROM below) AS d
    WHERE d.id = ANY (parents)
    LIMIT 1;
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'after names job %, which waits for job %: a cycle', missing, child
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO awc.job_parents (child_id, parent_id)
    SELECT child, p FROM unnest(locked) AS p
    ON CONFLICT DO NOTHING;
    UPDATE awc.jobs SET has_children = true WHERE id = ANY (locked) AND NOT has_children;
    SELECT count(*) FILTER (WHERE p.state NOT IN ('COMPLETED', 'FAILED', 'CANCELLED')),
           (array_agg('parent job ' || p.id || ' ended ' || p.state ORDER BY p.id)
               FILTER (WHERE p.state IN ('FAILED', 'CANCELLED')))[1]
    INTO unfinished, failed
    FROM awc.job_parents AS e JOIN awc.jobs AS p ON p.id = e.parent_id
    WHERE e.child_id = child;
    UPDATE awc.jobs AS j
    SET waiting = unfinished,
        on_parent_failure = declare_parents.on_parent_failure,
        state = CASE WHEN declare_parents.on_parent_failure = 'cancel' AND failed IS NOT NULL
                     THEN 'CANCELLED' ELSE j.state END,
        last_error = CASE WHEN declare_parents.on_parent_failure = 'cancel'
                               AND failed IS NOT NULL
                          THEN 'ParentFailed: ' || failed ELSE j.last_error END,
        finished_at = CASE WHEN declare_parents.on_parent_failure = 'cancel'
                                AND failed IS NOT NULL
                           THEN now() ELSE j.finished_at END
    WHERE j.id = child AND j.state = 'PENDING';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job % is not a PENDING job', child
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN unfinished;
END;
$$;

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
