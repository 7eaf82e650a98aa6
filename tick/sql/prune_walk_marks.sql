-- Walk journals whose job is no longer live (SPEC §17, migration 0024): a
-- walk's journal is deleted with its verdict, but one whose job completed,
-- failed or was cancelled otherwise stays until this sweep. The journal's
-- job ids by a skip scan of its primary key (a walk in progress may hold
-- hundreds of thousands of marks); those without a job in the hot table
-- (completed ones live in the finished parts, deleted ones nowhere), at
-- most %(limit)s jobs' journals a pass.
WITH RECURSIVE ids AS (
    SELECT min(job_id) AS id FROM awc.walk_marks
    UNION ALL
    SELECT (SELECT min(w.job_id) FROM awc.walk_marks AS w WHERE w.job_id > ids.id)
    FROM ids WHERE ids.id IS NOT NULL
), gone AS (
    SELECT ids.id FROM ids
    WHERE ids.id IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM ONLY awc.jobs AS j WHERE j.id = ids.id)
    LIMIT %(limit)s
)
DELETE FROM awc.walk_marks AS w USING gone WHERE w.job_id = gone.id
