-- The dependency functions plan their statements for themselves (SPEC §20,
-- docs/decisions/0033). The engine pins its queue statements' plans for
-- its transaction (tick/sql/pin_plans.sql: no hash or merge join, no
-- materialize, no sort, generic plans), which is right for a claim or a
-- fenced write and wrong for these functions' set-wise joins: under those
-- settings, with statistics taken when the table held few waiting children,
-- the completion of a parent with 10,000 children joined them to its
-- unnest() by a nested loop that rescanned the array once per child (100M
-- rows compared, 15 s in one completion), and the failure of such a parent
-- cascaded in 40 s instead of 0.15 s. Each function now sets, for its own
-- duration only, the planner's defaults and a plan made for the call's own
-- values (an array's length is then known); the caller's settings come back
-- when it returns. JIT stays off, for the reason the pin gives.
ALTER FUNCTION awc.settle_completed(bigint[], bigint[])
    SET enable_seqscan = on SET enable_bitmapscan = on SET enable_sort = on
    SET enable_hashjoin = on SET enable_mergejoin = on SET enable_material = on
    SET plan_cache_mode = force_custom_plan SET jit = off;
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
