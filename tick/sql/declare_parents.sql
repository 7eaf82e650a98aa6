-- Declare an enqueue's dependencies (SPEC §20), in the producer's transaction,
-- after the children are inserted and their existing parents locked
-- (lock_parents.sql). %(children)s and %(parents)s are the edges; %(ids)s and
-- %(policies)s the children with their on_parent_failure.
--
-- Each child waits for its parents not final now. A parent already FAILED
-- or CANCELLED cancels a child whose policy is "cancel" at once (and the
-- trigger cascades that down the graph declared in this same statement); a
-- "run" child counts it as done. The parents are marked has_children, so
-- their final outcome settles their children (awc.settle_children).
WITH edge AS (
    SELECT DISTINCT e.child, e.parent
    FROM unnest(%(children)s::bigint[], %(parents)s::bigint[]) AS e (child, parent)
), linked AS (
    INSERT INTO awc.job_parents (child_id, parent_id)
    SELECT child, parent FROM edge
    ON CONFLICT DO NOTHING
), tally AS (
    SELECT e.child,
           count(*) FILTER (WHERE p.state NOT IN ('COMPLETED', 'FAILED', 'CANCELLED'))
               AS waiting,
           (array_agg('parent job ' || p.id || ' ended ' || p.state ORDER BY p.id)
               FILTER (WHERE p.state IN ('FAILED', 'CANCELLED')))[1] AS failed
    FROM edge AS e JOIN awc.jobs AS p ON p.id = e.parent
    GROUP BY e.child
), item AS (
    -- Whether each child is a parent too: one hashed lookup, not a walk of
    -- the edges per child.
    SELECT i.id, i.policy, i.id IN (SELECT parent FROM edge) AS parent
    FROM unnest(%(ids)s::bigint[], %(policies)s::text[]) AS i (id, policy)
), target AS (
    SELECT i.id, i.policy, i.parent, t.waiting, t.failed
    FROM item AS i LEFT JOIN tally AS t ON t.child = i.id
    UNION ALL
    SELECT DISTINCT e.parent, NULL, true, NULL::bigint, NULL
    FROM edge AS e
    WHERE e.parent NOT IN (SELECT id FROM item)
), marked AS (
    UPDATE awc.jobs AS j
    SET has_children = j.has_children OR t.parent,
        on_parent_failure = coalesce(t.policy, j.on_parent_failure),
        waiting = CASE WHEN t.policy IS NULL THEN j.waiting ELSE coalesce(t.waiting, 0) END,
        state = CASE WHEN t.policy = 'cancel' AND t.failed IS NOT NULL THEN 'CANCELLED'
                     ELSE j.state END,
        last_error = CASE WHEN t.policy = 'cancel' AND t.failed IS NOT NULL
                          THEN 'ParentFailed: ' || t.failed ELSE j.last_error END,
        finished_at = CASE WHEN t.policy = 'cancel' AND t.failed IS NOT NULL THEN now()
                           ELSE j.finished_at END
    FROM target AS t
    WHERE j.id = t.id
      -- Only a row this changes: the producer inserted the call's jobs
      -- waiting and marked as it expected them (tick/parents.py), and an
      -- update that changes nothing still wrote each row again, with an
      -- entry in every index.
      AND CASE WHEN t.policy IS NULL THEN NOT j.has_children
               ELSE j.waiting IS DISTINCT FROM coalesce(t.waiting, 0)
                    OR j.on_parent_failure IS DISTINCT FROM t.policy
                    OR (t.policy = 'cancel' AND t.failed IS NOT NULL)
                    OR (t.parent AND NOT j.has_children) END
    RETURNING j.id
)
SELECT count(*) FROM marked
