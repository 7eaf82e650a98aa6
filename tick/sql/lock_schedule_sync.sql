-- Serialise `awc schedules sync` runs (SPEC §15): two deploys syncing at once
-- would otherwise lock the same schedules in different orders (their files
-- list them differently, and --prune deletes in table order) and deadlock.
-- One waits for the other's transaction; both succeed. A transaction-level
-- lock, so it works through a transaction-pooling proxy (SPEC §3).
SELECT pg_advisory_xact_lock(%(key)s::bigint)
