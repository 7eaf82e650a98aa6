-- The live jobs holding these dedupe keys (for enqueue_many's skipped rows).
SELECT dedupe_key, id
FROM ONLY awc.jobs
WHERE dedupe_key = ANY (%(keys)s::text[])
  AND state IN ('PENDING', 'RUNNING')
