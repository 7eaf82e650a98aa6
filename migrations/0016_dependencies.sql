-- Dependencies between jobs (SPEC §20, docs/decisions/0033).
--
-- * job_parents holds the edges, declared when the child is enqueued (every
--   parent exists by then, so no cycle can be built).
-- * waiting counts the child's parents not yet final; the ready indexes hold
--   only jobs with none, so a claim never walks a waiting child.
-- * has_children marks a parent, so the trigger that settles children skips
--   every other row in its WHEN clause.
-- The columns have constant defaults: adding them rewrites no row.
ALTER TABLE awc.jobs ADD COLUMN waiting integer NOT NULL DEFAULT 0;
ALTER TABLE awc.jobs ADD COLUMN has_children boolean NOT NULL DEFAULT false;
ALTER TABLE awc.jobs ADD COLUMN on_parent_failure text NOT NULL DEFAULT 'cancel';
ALTER TABLE awc.jobs ADD CONSTRAINT jobs_waiting_check CHECK (waiting >= 0);
ALTER TABLE awc.jobs ADD CONSTRAINT jobs_on_parent_failure_check
    CHECK (on_parent_failure IN ('cancel', 'run'));

CREATE TABLE awc.job_parents (
    -- No foreign key: a completed child moves to a finished part (SPEC §24,
    -- decision 0030), where a key cannot follow it; its edges stay for `awc
    -- jobs show` and go when the prune or a discard takes the child.
    child_id  bigint NOT NULL,
    parent_id bigint NOT NULL,
    PRIMARY KEY (child_id, parent_id)
);
-- A parent's children, in id order (the order the trigger locks them in).
CREATE INDEX job_parents_parent_idx ON awc.job_parents (parent_id, child_id);

DROP INDEX awc.jobs_ready_idx;
CREATE INDEX jobs_ready_idx ON awc.jobs ((-priority::int), run_at, id)
    WHERE state = 'PENDING' AND waiting = 0;
DROP INDEX awc.jobs_ready_queue_idx;
CREATE INDEX jobs_ready_queue_idx ON awc.jobs (queue, (-priority::int), run_at, id)
    WHERE state = 'PENDING' AND waiting = 0;
DROP INDEX awc.jobs_ready_xid_idx;
CREATE INDEX jobs_ready_xid_idx ON awc.jobs (ready_xid)
    WHERE state = 'PENDING' AND waiting = 0 AND ready_xid IS NOT NULL;
DROP INDEX awc.jobs_ready_lane_idx;
CREATE INDEX jobs_ready_lane_idx ON awc.jobs (kind, queue, priority, run_at, id)
    WHERE state = 'PENDING' AND waiting = 0;
-- The children still waiting, which no ready index holds (the console's
-- counts and bulk actions, `awc jobs list`).
CREATE INDEX jobs_waiting_idx ON awc.jobs (id) WHERE state = 'PENDING' AND waiting > 0;

-- Queue depth counts ready jobs only: a waiting child is not depth.
CREATE OR REPLACE FUNCTION awc.ready_jobs(queue text DEFAULT NULL, cap integer DEFAULT 100000)
    RETURNS bigint
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    -- The walk in key order that stops at `cap`, never a bitmap of every
    -- ready row sorted: a generic plan cannot tell how many rows match.
    SET enable_bitmapscan = off SET enable_sort = off AS $$
DECLARE
    -- A kind or queue whose max_running is 0 is paused (SPEC §18): its jobs
    -- are not claimable, so they are not depth.
    paused_kinds  text[] := ARRAY(SELECT l.name FROM awc.limits AS l
                                  WHERE l.scope = 'kind' AND l.max_running = 0);
    paused_queues text[] := ARRAY(SELECT l.name FROM awc.limits AS l
                                  WHERE l.scope = 'queue' AND l.max_running = 0);
    most          integer := greatest(coalesce(cap, 100000), 0);
    depth         bigint;
BEGIN
    IF ready_jobs.queue IS NULL THEN
        SELECT count(*) INTO depth FROM (
            SELECT 1 FROM awc.jobs AS j
            WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.run_at <= now()
              AND j.kind <> ALL (paused_kinds) AND j.queue <> ALL (paused_queues)
            ORDER BY -j.priority::int, j.run_at, j.id  -- the index's order: it stops at `most`
            LIMIT most) AS due;
    ELSE
        SELECT count(*) INTO depth FROM (
            SELECT 1 FROM awc.jobs AS j
            WHERE j.state = 'PENDING' AND j.waiting = 0 AND j.queue = ready_jobs.queue AND j.run_at <= now()
              AND j.kind <> ALL (paused_kinds) AND j.queue <> ALL (paused_queues)
            ORDER BY j.queue, -j.priority::int, j.run_at, j.id  -- the index's order: it stops at `most`
            LIMIT most) AS due;
    END IF;
    RETURN depth;
END;
$$;

CREATE FUNCTION awc.count_waiting() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    -- A job an operator retries (or a cascade revives) waits again for
    -- every parent not final now; a parent that failed no longer holds it.
    NEW.waiting := (SELECT count(*) FROM awc.job_parents AS e
                    JOIN awc.jobs AS p ON p.id = e.parent_id
                    WHERE e.child_id = NEW.id
                      AND p.state NOT IN ('COMPLETED', 'FAILED', 'CANCELLED'));
    RETURN NEW;
END;
$$;

CREATE TRIGGER jobs_count_waiting BEFORE UPDATE OF state ON awc.jobs
    FOR EACH ROW WHEN (NEW.state = 'PENDING' AND OLD.state IN ('FAILED', 'CANCELLED'))
    EXECUTE FUNCTION awc.count_waiting();

-- A parent's final outcome settles its children in the same transaction
-- (SPEC §20, docs/decisions/0033): the fan-in race is closed by the child's
-- row lock, which each decrement takes, so two parents finishing at once
-- count down one after the other and exactly one of them makes it zero.
CREATE FUNCTION awc.settle_children() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    ready   bigint;
    revived bigint[];
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
        -- graph; the others ("run") count one final parent more.
        WITH RECURSIVE doomed (id, culprit, culprit_state) AS (
            SELECT c.id, NEW.id, NEW.state
            FROM awc.job_parents AS e JOIN awc.jobs AS c ON c.id = e.child_id
            WHERE e.parent_id = NEW.id AND c.state = 'PENDING' AND c.waiting > 0
              AND c.on_parent_failure = 'cancel'
            UNION
            SELECT c.id, d.id, 'CANCELLED'
            FROM doomed AS d
            JOIN awc.job_parents AS e ON e.parent_id = d.id
            JOIN awc.jobs AS c ON c.id = e.child_id
            WHERE c.state = 'PENDING' AND c.waiting > 0 AND c.on_parent_failure = 'cancel'
        ), cancelled AS (
            UPDATE awc.jobs AS c
            SET state = 'CANCELLED',
                last_error = 'ParentFailed: parent job ' || d.culprit || ' ended ' || d.culprit_state,
                finished_at = now(),
                updated_at = now()
            FROM (SELECT DISTINCT ON (id) id, culprit, culprit_state FROM doomed
                  ORDER BY id, culprit) AS d
            WHERE c.id = d.id AND c.state = 'PENDING'
            RETURNING c.id
        ), spared AS (
            SELECT e.child_id AS id, count(*) AS n
            FROM awc.job_parents AS e
            WHERE (e.parent_id = NEW.id OR e.parent_id IN (SELECT id FROM cancelled))
              AND e.child_id NOT IN (SELECT id FROM doomed)
            GROUP BY e.child_id
        ), counted AS (
            UPDATE awc.jobs AS c
            SET waiting = c.waiting - least(s.n, c.waiting)::integer
            FROM spared AS s
            WHERE c.id = s.id AND c.state = 'PENDING' AND c.waiting > 0
            RETURNING c.waiting
        )
        SELECT count(*) INTO ready FROM counted WHERE counted.waiting = 0;
        PERFORM set_config('awc.cascading', '', true);
    ELSE
        -- An operator retry of a failed or cancelled parent: its children
        -- still waiting count it unfinished again, and the descendants its
        -- failure cancelled wait again (unless another parent still stands
        -- failed), level by level so a child's other parents are settled first.
        PERFORM set_config('awc.cascading', 'on', true);
        revived := ARRAY[NEW.id];
        WHILE cardinality(revived) > 0 LOOP
            UPDATE awc.jobs AS c
            SET waiting = c.waiting + s.n::integer
            FROM (SELECT e.child_id, count(*) AS n FROM awc.job_parents AS e
                  WHERE e.parent_id = ANY (revived) GROUP BY e.child_id) AS s
            WHERE c.id = s.child_id AND c.state = 'PENDING' AND c.waiting > 0;
            WITH back AS (
                UPDATE awc.jobs AS c
                SET state = 'PENDING', finished_at = NULL, updated_at = now()
                WHERE c.id IN (SELECT e.child_id FROM awc.job_parents AS e
                               WHERE e.parent_id = ANY (revived))
                  AND c.state = 'CANCELLED' AND c.last_error LIKE 'ParentFailed:%'
                  AND NOT EXISTS (
                      SELECT 1 FROM awc.job_parents AS e JOIN awc.jobs AS p ON p.id = e.parent_id
                      WHERE e.child_id = c.id AND p.state IN ('FAILED', 'CANCELLED'))
                RETURNING c.id)
            SELECT coalesce(array_agg(id), '{}') INTO revived FROM back;
        END LOOP;
        PERFORM set_config('awc.cascading', '', true);
        ready := 0;
    END IF;
    IF ready > 0 THEN
        PERFORM pg_notify('awc_jobs', '');  -- a waiting loop wakes for the child
    END IF;
    RETURN NULL;
END;
$$;

-- Only a job with children, and only when it becomes final or an operator
-- retries it: every other update skips the call at the cost of this test.
CREATE TRIGGER jobs_settle_children AFTER UPDATE OF state ON awc.jobs
    FOR EACH ROW WHEN (NEW.has_children AND OLD.state <> NEW.state AND (
        (OLD.state IN ('PENDING', 'RUNNING')
         AND NEW.state IN ('COMPLETED', 'FAILED', 'CANCELLED'))
        OR (OLD.state IN ('FAILED', 'CANCELLED') AND NEW.state = 'PENDING')))
    EXECUTE FUNCTION awc.settle_children();

-- A producer waiting for a job's outcome (tick.wait, `awc wait`) wakes on
-- this notification, sent once per job that becomes final.
CREATE FUNCTION awc.notify_final() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('awc_final', NEW.id::text);
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_notify_final AFTER UPDATE OF state ON awc.jobs
    FOR EACH ROW WHEN (OLD.state IN ('PENDING', 'RUNNING')
                       AND NEW.state IN ('COMPLETED', 'FAILED', 'CANCELLED'))
    EXECUTE FUNCTION awc.notify_final();

-- A completion moves its job into a finished part (SPEC §24, decision 0030):
-- an insert there, not an update of the state, is where a completed parent
-- settles its children and a waiter hears of the outcome.
CREATE TRIGGER jobs_done_0_settle_children AFTER INSERT ON awc.jobs_done_0
    FOR EACH ROW WHEN (NEW.has_children) EXECUTE FUNCTION awc.settle_children();
CREATE TRIGGER jobs_done_0_notify_final AFTER INSERT ON awc.jobs_done_0
    FOR EACH ROW EXECUTE FUNCTION awc.notify_final();
CREATE TRIGGER jobs_done_1_settle_children AFTER INSERT ON awc.jobs_done_1
    FOR EACH ROW WHEN (NEW.has_children) EXECUTE FUNCTION awc.settle_children();
CREATE TRIGGER jobs_done_1_notify_final AFTER INSERT ON awc.jobs_done_1
    FOR EACH ROW EXECUTE FUNCTION awc.notify_final();
CREATE TRIGGER jobs_done_2_settle_children AFTER INSERT ON awc.jobs_done_2
    FOR EACH ROW WHEN (NEW.has_children) EXECUTE FUNCTION awc.settle_children();
CREATE TRIGGER jobs_done_2_notify_final AFTER INSERT ON awc.jobs_done_2
    FOR EACH ROW EXECUTE FUNCTION awc.notify_final();
CREATE TRIGGER jobs_done_3_settle_children AFTER INSERT ON awc.jobs_done_3
    FOR EACH ROW WHEN (NEW.has_children) EXECUTE FUNCTION awc.settle_children();
CREATE TRIGGER jobs_done_3_notify_final AFTER INSERT ON awc.jobs_done_3
    FOR EACH ROW EXECUTE FUNCTION awc.notify_final();
CREATE TRIGGER jobs_done_4_settle_children AFTER INSERT ON awc.jobs_done_4
    FOR EACH ROW WHEN (NEW.has_children) EXECUTE FUNCTION awc.settle_children();
CREATE TRIGGER jobs_done_4_notify_final AFTER INSERT ON awc.jobs_done_4
    FOR EACH ROW EXECUTE FUNCTION awc.notify_final();
CREATE TRIGGER jobs_done_5_settle_children AFTER INSERT ON awc.jobs_done_5
    FOR EACH ROW WHEN (NEW.has_children) EXECUTE FUNCTION awc.settle_children();
CREATE TRIGGER jobs_done_5_notify_final AFTER INSERT ON awc.jobs_done_5
    FOR EACH ROW EXECUTE FUNCTION awc.notify_final();
CREATE TRIGGER jobs_done_6_settle_children AFTER INSERT ON awc.jobs_done_6
    FOR EACH ROW WHEN (NEW.has_children) EXECUTE FUNCTION awc.settle_children();
CREATE TRIGGER jobs_done_6_notify_final AFTER INSERT ON awc.jobs_done_6
    FOR EACH ROW EXECUTE FUNCTION awc.notify_final();
CREATE TRIGGER jobs_done_7_settle_children AFTER INSERT ON awc.jobs_done_7
    FOR EACH ROW WHEN (NEW.has_children) EXECUTE FUNCTION awc.settle_children();
CREATE TRIGGER jobs_done_7_notify_final AFTER INSERT ON awc.jobs_done_7
    FOR EACH ROW EXECUTE FUNCTION awc.notify_final();

-- The plain-SQL way to declare a job's parents (SPEC §20), for producers in
-- any language: in the transaction that inserted the child, before it
-- commits. The same rules as enqueue(after=...): every parent must exist
-- (locked in id order until the commit, so none becomes final unseen), a
-- parent already failed cancels a "cancel" child at once. Returns how many
-- parents the child waits for.
CREATE FUNCTION awc.declare_parents(child bigint, parents bigint[],
                                    on_parent_failure text DEFAULT 'cancel')
    RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    locked  bigint[];
    missing bigint;
    failed  text;
    unfinished integer;
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
    locked := ARRAY(SELECT j.id FROM awc.jobs AS j WHERE j.id = ANY (parents)
                   ORDER BY j.id FOR NO KEY UPDATE);
    SELECT p INTO missing FROM unnest(parents) AS p WHERE p <> ALL (locked) OR p = child LIMIT 1;
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'after names job %, which does not exist or is the child', missing
            USING ERRCODE = 'foreign_key_violation';
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
