-- The current finished part stops taking completions (SPEC §24); the next
-- statement names its successor, in the same transaction as its TRUNCATE.
UPDATE awc.done_parts SET current = false WHERE current
