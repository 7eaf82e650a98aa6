-- The console's overview: the jobs table's size as the planner knows it
-- (pg_class, kept by autovacuum's ANALYZE): an estimate, never a count.
SELECT greatest(reltuples, 0)::bigint
FROM pg_class
WHERE oid = 'awc.jobs'::regclass
