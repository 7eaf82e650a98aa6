-- Pin the plan shape of this transaction's queue statements (SPEC §6, bench/).
-- A queue table's statistics lag behind its churn: analyzed when nearly empty,
-- the planner would bitmap-scan every ready job and sort them to take a batch,
-- and join a fenced write against every RUNNING row (hashing them, or probing
-- the batch's unnest() once per RUNNING row). Queue statements always want the
-- ordered index scan with LIMIT and primary-key probes, so the alternatives
-- are turned off for this transaction only (set_config is_local). Disabling
-- a sequential scan only steers: a statement with no index path still runs.
-- Its penalty inflates the plan's cost, so JIT (which the cost alone
-- triggers) is off too: compiling takes a second; these statements, a
-- millisecond. And a prepared statement runs its generic plan at once
-- (plan_cache_mode): the shapes above do not depend on the values, and
-- replanning a claim every round trip cost a 1M-row table 10% of its drain
-- (tests/test_plans.py checks the generic plans too).
-- Floats in full, as the connection's startup options ask (decision 0038):
-- a transaction-pooling proxy may have dropped those, and a role's
-- extra_float_digits = -15 read a 26 s lease back as 30 s. (ISO dates are
-- the connection's own: tick.db.pin_session, which the proxy keeps.)
SELECT set_config('enable_sort', 'off', true),
       set_config('enable_seqscan', 'off', true),
       set_config('enable_bitmapscan', 'off', true),
       set_config('enable_hashjoin', 'off', true),
       set_config('enable_mergejoin', 'off', true),
       set_config('enable_material', 'off', true),
       set_config('jit', 'off', true),
       set_config('plan_cache_mode', 'force_generic_plan', true),
       set_config('extra_float_digits', '3', true)
