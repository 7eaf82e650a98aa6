-- A completion no longer pays a cascade per job (SPEC §24, §17,
-- docs/decisions/0030). Since the finished parts a completion deletes the
-- job from the hot table, and the journal's foreign key made that delete run
-- a cascading DELETE on awc.walk_marks for every completed job: 0.55 ms of a
-- 256-job completion's 3.5 (2 µs a job), for a table almost always empty. A
-- journal is written only under its job's RUNNING claim (handlers/journal.py
-- locks the row FOR SHARE) and deleted with the walk's verdict; what a job
-- leaves behind when it ends another way, the prune sweeps
-- (prune_walk_marks.sql).
ALTER TABLE awc.walk_marks DROP CONSTRAINT walk_marks_job_id_fkey;
