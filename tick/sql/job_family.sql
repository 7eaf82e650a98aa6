-- A job's parents and children (SPEC §20), for `awc jobs show` and the
-- console's job page: how many parents it has, how many of them are not yet
-- final ("waiting for N of M parents"), and the first %(shown)s parents and
-- children in id order with their kinds and states. Children are counted up
-- to %(cap)s (a fan-out may have any number); parents are at most 10,000.
SELECT
    (SELECT count(*) FROM awc.job_parents AS e WHERE e.child_id = %(id)s) AS parents,
    (SELECT count(*) FROM awc.job_parents AS e JOIN awc.jobs AS p ON p.id = e.parent_id
     WHERE e.child_id = %(id)s AND p.state NOT IN ('COMPLETED', 'FAILED', 'CANCELLED'))
        AS unfinished,
    (SELECT coalesce(json_agg(json_build_array(s.id, s.kind, s.state) ORDER BY s.id), '[]')
     FROM (SELECT p.id, p.kind, p.state
           FROM awc.job_parents AS e JOIN awc.jobs AS p ON p.id = e.parent_id
           WHERE e.child_id = %(id)s ORDER BY e.parent_id LIMIT %(shown)s) AS s)::text
        AS parents_shown,
    (SELECT count(*) FROM (SELECT 1 FROM awc.job_parents AS e WHERE e.parent_id = %(id)s
                           LIMIT %(cap)s) AS c) AS children,
    (SELECT coalesce(json_agg(json_build_array(s.id, s.kind, s.state) ORDER BY s.id), '[]')
     FROM (SELECT c.id, c.kind, c.state
           FROM awc.job_parents AS e JOIN awc.jobs AS c ON c.id = e.child_id
           WHERE e.parent_id = %(id)s ORDER BY e.child_id LIMIT %(shown)s) AS s)::text
        AS children_shown,
    (SELECT on_parent_failure FROM awc.jobs WHERE id = %(id)s) AS on_parent_failure,
    -- What holds the job: its own count of parents not yet final (the claim
    -- reads it), and its edges to jobs that no longer exist (deleted by
    -- hand: a count they leave above 0 holds the job for ever).
    (SELECT waiting FROM ONLY awc.jobs WHERE id = %(id)s AND state = 'PENDING') AS counted,
    (SELECT count(*) FROM awc.job_parents AS e
     WHERE e.child_id = %(id)s
       AND NOT EXISTS (SELECT 1 FROM awc.jobs AS p WHERE p.id = e.parent_id)) AS missing
