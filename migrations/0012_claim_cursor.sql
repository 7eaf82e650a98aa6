-- The claim's cursor (SPEC §24, docs/decisions/0027). Under a pinned xmin
-- horizon nothing may remove the ready index's entries of claimed jobs, so a
-- claim walking it from its start walks every job claimed since the pin. A
-- claimer now walks from where its last claim left off, which needs:
--
-- * the ready indexes keyed in claim order with every column ascending
--   ((-priority, run_at, id)), so "after this key" is one index range;
-- * ready_xid, the transaction that last made the job ready (its enqueue, or
--   the update that put it back to PENDING): jobs that become ready behind a
--   cursor (a transaction that commits late, a retry, a rescue) are found by
--   the transactions the last claim's snapshot could not see, not by a walk.
--
-- The column is added without a default first, so no existing row is
-- rewritten (their enqueues are long visible to every claim), then gains
-- its default for new rows. The trigger stamps every update to PENDING,
-- whoever makes it (awc's statements, or an operator's own SQL).
ALTER TABLE awc.jobs ADD COLUMN ready_xid xid8;
ALTER TABLE awc.jobs ALTER COLUMN ready_xid SET DEFAULT pg_current_xact_id();

CREATE FUNCTION awc.stamp_ready_xid() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    NEW.ready_xid := pg_current_xact_id();
    RETURN NEW;
END;
$$;

CREATE TRIGGER jobs_ready_xid BEFORE UPDATE ON awc.jobs
    FOR EACH ROW WHEN (NEW.state = 'PENDING') EXECUTE FUNCTION awc.stamp_ready_xid();

DROP INDEX awc.jobs_ready_idx;
CREATE INDEX jobs_ready_idx ON awc.jobs ((-priority::int), run_at, id) WHERE state = 'PENDING';
DROP INDEX awc.jobs_ready_queue_idx;
CREATE INDEX jobs_ready_queue_idx ON awc.jobs (queue, (-priority::int), run_at, id)
    WHERE state = 'PENDING';
-- "ready_xid IS NOT NULL", which only a ready_xid comparison proves, keeps
-- other readers of PENDING jobs (a queue's or a kind's probe) on their own
-- indexes: this one is small, and a planner would walk it with a filter.
CREATE INDEX jobs_ready_xid_idx ON awc.jobs (ready_xid)
    WHERE state = 'PENDING' AND ready_xid IS NOT NULL;

-- Queue depth walks the new key's order (it stops at `cap`).
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
            WHERE j.state = 'PENDING' AND j.run_at <= now()
              AND j.kind <> ALL (paused_kinds) AND j.queue <> ALL (paused_queues)
            ORDER BY -j.priority::int, j.run_at, j.id  -- the index's order: it stops at `most`
            LIMIT most) AS due;
    ELSE
        SELECT count(*) INTO depth FROM (
            SELECT 1 FROM awc.jobs AS j
            WHERE j.state = 'PENDING' AND j.queue = ready_jobs.queue AND j.run_at <= now()
              AND j.kind <> ALL (paused_kinds) AND j.queue <> ALL (paused_queues)
            ORDER BY j.queue, -j.priority::int, j.run_at, j.id  -- the index's order: it stops at `most`
            LIMIT most) AS due;
    END IF;
    RETURN depth;
END;
$$;
