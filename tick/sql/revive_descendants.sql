-- After revive_jobs.sql (SPEC §20, decision 0033): the descendants of the
-- revived jobs %(ids)s, all at once: the jobs their failure cancelled wait
-- again, level by level (their PENDING children are counted again next, by
-- recount_waiting.sql); then the revived jobs' triggers settle their
-- descendants themselves again, for the rest of the transaction.
SELECT awc.revive_descendants(%(ids)s::bigint[], true), set_config('awc.reviving', '', true)
