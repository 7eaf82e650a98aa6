-- Take a maintenance step's lock for this transaction, or learn that another
-- process holds it (SPEC §7.3): concurrent ticks skip the step, never queue.
SELECT pg_try_advisory_xact_lock(%(key)s::bigint)
