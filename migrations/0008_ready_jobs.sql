-- Queue depth for autoscalers (SPEC §25): how many jobs a worker could claim
-- now, capped, for KEDA's `postgresql` trigger or a CloudWatch metric.
--
-- It walks the claim's own ready index (jobs_ready_idx, or
-- jobs_ready_queue_idx for one queue) and stops after `cap` claimable rows:
-- finished history is never read, and the work is the rows it counts plus
-- the ready rows it passes over (due later, or of a paused kind or queue).
-- PL/pgSQL so each branch keeps its own plan: `queue IS NULL OR ...` in one
-- statement would lose the queue index.
CREATE FUNCTION awc.ready_jobs(queue text DEFAULT NULL, cap integer DEFAULT 100000)
    RETURNS bigint
    LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
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
            ORDER BY j.priority DESC, j.run_at, j.id  -- the index's order: it stops at `most`
            LIMIT most) AS due;
    ELSE
        SELECT count(*) INTO depth FROM (
            SELECT 1 FROM awc.jobs AS j
            WHERE j.state = 'PENDING' AND j.queue = ready_jobs.queue AND j.run_at <= now()
              AND j.kind <> ALL (paused_kinds) AND j.queue <> ALL (paused_queues)
            ORDER BY j.priority DESC, j.run_at, j.id  -- the index's order: it stops at `most`
            LIMIT most) AS due;
    END IF;
    RETURN depth;
END;
$$;
