-- Whether a job's kind, queue, key or dedupe key is longer than a producer
-- writes (revive_jobs.sql leaves such a job as it is): for `awc retry`'s message.
SELECT length(kind) > 200 OR length(queue) > 200 OR coalesce(length(key), 0) > 200
       OR coalesce(length(dedupe_key), 0) > 1000
FROM awc.jobs WHERE id = %(id)s
